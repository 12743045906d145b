package router

import "google.golang.org/protobuf/reflect/protoreflect"

// The fields of the route-level messages the router compiles that
// strait-proxy honours; any other set field is refused by name
// (fieldaudit.Only).

// headerValueOptionFields are the HeaderValueOption fields of every
// *_headers_to_add list.
var headerValueOptionFields = map[protoreflect.Name]bool{
	"header": true, "append": true, "append_action": true, "keep_empty_value": true,
}

// retryPolicyFields are the RetryPolicy fields strait-proxy implements; any
// other set field is refused by name.
var retryPolicyFields = map[protoreflect.Name]bool{
	"retry_on": true, "num_retries": true, "per_try_timeout": true,
	"retriable_status_codes": true, "retry_back_off": true,
	"retry_host_predicate": true, "host_selection_retry_max_attempts": true,
	"retry_priority": true,
}
