// Package nds encodes and decodes Istio's NDS name table
// (istio.networking.nds.v1.NameTable, defined in Istio's
// pkg/dns/proto/nds.proto): the host → IPs table the control plane sends to
// the agents that proxy their pod's DNS.
//
// The message is not part of istio.io/api, so it is written here with
// protowire against its field numbers rather than generated from a copied
// .proto: four fields do not justify a generated package and its registry
// entry.
//
//	message NameTable {
//	  message NameInfo {
//	    repeated string ips = 1;
//	    string registry = 2;
//	    string shortname = 3;
//	    string namespace = 4;
//	  }
//	  map<string, NameInfo> table = 1;
//	}
package nds

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
)

// TypeURL is the NameTable's xDS type URL.
const TypeURL = "type.googleapis.com/istio.networking.nds.v1.NameTable"

// RegistryKubernetes is NameInfo.Registry for services of the Kubernetes
// registry; only those get short names (name, name.namespace, ...).
const RegistryKubernetes = "Kubernetes"

// NameInfo is one host of the table.
type NameInfo struct {
	// IPs are the host's addresses (IPv4 and IPv6, as text).
	IPs []string
	// Registry is the service's registry, e.g. "Kubernetes".
	Registry string
	// Shortname and Namespace are the Kubernetes service's name and
	// namespace (Registry "Kubernetes" only).
	Shortname string
	Namespace string
}

// NameTable maps a host name (without a trailing dot) to its NameInfo.
type NameTable map[string]NameInfo

// Marshal encodes t; hosts are written in sorted order, so equal tables
// encode to equal bytes.
func Marshal(t NameTable) []byte {
	hosts := make([]string, 0, len(t))
	for h := range t {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	var b []byte
	for _, h := range hosts {
		var entry []byte
		entry = protowire.AppendTag(entry, 1, protowire.BytesType)
		entry = protowire.AppendString(entry, h)
		entry = protowire.AppendTag(entry, 2, protowire.BytesType)
		entry = protowire.AppendBytes(entry, marshalInfo(t[h]))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, entry)
	}
	return b
}

func marshalInfo(ni NameInfo) []byte {
	var b []byte
	for _, ip := range ni.IPs {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, ip)
	}
	for _, f := range []struct {
		num protowire.Number
		v   string
	}{{2, ni.Registry}, {3, ni.Shortname}, {4, ni.Namespace}} {
		if f.v != "" {
			b = protowire.AppendTag(b, f.num, protowire.BytesType)
			b = protowire.AppendString(b, f.v)
		}
	}
	return b
}

// Unmarshal decodes a NameTable. Unknown fields (from a newer Istio) are
// skipped, as protobuf decoders do.
func Unmarshal(b []byte) (NameTable, error) {
	t := NameTable{}
	err := fields(b, func(num protowire.Number, v []byte) error {
		if num != 1 {
			return nil
		}
		var host string
		var ni NameInfo
		err := fields(v, func(num protowire.Number, v []byte) error {
			switch num {
			case 1:
				host = string(v)
			case 2:
				var err error
				ni, err = unmarshalInfo(v)
				return err
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("table entry: %w", err)
		}
		t[host] = ni
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("NameTable: %w", err)
	}
	return t, nil
}

func unmarshalInfo(b []byte) (NameInfo, error) {
	var ni NameInfo
	err := fields(b, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			ni.IPs = append(ni.IPs, string(v))
		case 2:
			ni.Registry = string(v)
		case 3:
			ni.Shortname = string(v)
		case 4:
			ni.Namespace = string(v)
		}
		return nil
	})
	if err != nil {
		return NameInfo{}, fmt.Errorf("NameInfo: %w", err)
	}
	return ni, nil
}

// fields calls fn with each length-delimited field of b; fields of other
// wire types are skipped (the NameTable has none).
func fields(b []byte, fn func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, v); err != nil {
			return err
		}
	}
	return nil
}
