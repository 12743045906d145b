package lb

import "google.golang.org/protobuf/reflect/protoreflect"

// The lb_config messages' allow-lists: Parse refuses, by name, a field
// outside them (fieldaudit.Only). The Cluster's own lb fields are in the
// cluster's audit (package cluster, fields.go); TestLBConfigFields holds
// these lists to the protos.
var (
	ringHashFields     = map[protoreflect.Name]bool{"minimum_ring_size": true, "maximum_ring_size": true, "hash_function": true}
	leastRequestFields = map[protoreflect.Name]bool{"choice_count": true, "slow_start_config": true}
	roundRobinFields   = map[protoreflect.Name]bool{"slow_start_config": true}
	slowStartFields    = map[protoreflect.Name]bool{"slow_start_window": true, "aggression": true, "min_weight_percent": true}
)
