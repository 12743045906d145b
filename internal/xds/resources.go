package xds

import (
	"crypto/sha256"
	"encoding/hex"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// resourceVersion is the version of one generated resource: the
// generator's Version when it set one (a content hash it cached), else a
// hash of the serialized resource. Both protocols compare resources by it.
func resourceVersion(r *discovery.Resource) string {
	if r.GetVersion() != "" {
		return r.GetVersion()
	}
	sum := sha256.Sum256(r.GetResource().GetValue())
	return hex.EncodeToString(sum[:12])
}

// hashResources returns the resources as Anys and a hash of their names and
// serialized bytes (or, for resources whose generator set a content
// version, that version).
func hashResources(res []*discovery.Resource) ([32]byte, []*anypb.Any) {
	h := sha256.New()
	anys := make([]*anypb.Any, 0, len(res))
	var n [8]byte
	write := func(b []byte) {
		// Length-prefix every field so that boundaries cannot shift.
		for i, l := 0, uint64(len(b)); i < 8; i++ {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write(b)
	}
	for _, r := range res {
		if r == nil || r.GetResource() == nil {
			continue
		}
		anys = append(anys, r.GetResource())
		write([]byte(r.GetName()))
		write([]byte(r.GetResource().GetTypeUrl()))
		if r.GetVersion() != "" {
			write([]byte(r.GetVersion()))
		} else {
			write(r.GetResource().GetValue())
		}
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, anys
}
