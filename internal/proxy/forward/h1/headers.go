package h1

// This file edits a parsed head's fields in place for the router's header
// mutations (router.HeaderOps), and applies a route's response mutations.

import (
	"github.com/straitmesh/strait/internal/proxy/http1"
	"github.com/straitmesh/strait/internal/proxy/route"
	"github.com/straitmesh/strait/internal/proxy/router"
)

// HeaderEditor edits a parsed head's fields in place for router.HeaderOps:
// a removed field is marked Hop (not forwarded), an added one goes to
// Extra, written after the others.
type HeaderEditor struct {
	HS    http1.Headers
	Extra *[]http1.Header
}

// Has reports whether a field named name is forwarded.
func (e HeaderEditor) Has(name string) bool {
	for i := range e.HS {
		if !e.HS[i].Hop && http1.EqualFold(e.HS[i].Name, name) {
			return true
		}
	}
	for _, h := range *e.Extra {
		if http1.EqualFold(h.Name, name) {
			return true
		}
	}
	return false
}

// Del removes the fields named name.
func (e HeaderEditor) Del(name string) {
	for i := range e.HS {
		if http1.EqualFold(e.HS[i].Name, name) {
			e.HS[i].Hop = true
		}
	}
	x := (*e.Extra)[:0]
	for _, h := range *e.Extra {
		if !http1.EqualFold(h.Name, name) {
			x = append(x, h)
		}
	}
	*e.Extra = x
}

// Add adds a field.
func (e HeaderEditor) Add(name, value string) {
	*e.Extra = append(*e.Extra, http1.Header{Name: []byte(name), Value: []byte(value)})
}

var _ router.HeaderEditor = HeaderEditor{}

// mutateResponse applies the response header mutations to x.Resp.
func (x *Exchange) mutateResponse(rt *route.Route, t *route.WeightedCluster) {
	if t.ResponseHeaders.Empty() && rt.ResponseHeaders.Empty() {
		return
	}
	e := HeaderEditor{HS: x.Resp.Headers, Extra: &x.RespExtra}
	t.ResponseHeaders.Apply(e)
	rt.ResponseHeaders.Apply(e)
}
