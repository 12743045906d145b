package httpfilter

import "testing"

func TestMetadata(t *testing.T) {
	var nilMD *Metadata
	if _, ok := nilMD.Get("istio_authn", "request.auth.principal"); ok {
		t.Error("nil Metadata has a value")
	}
	var md Metadata
	if _, ok := md.Get("istio_authn", "request.auth.principal"); ok {
		t.Error("empty Metadata has a value")
	}
	md.Set("istio_authn", "request.auth.principal", "iss/sub")
	md.Set("istio_authn", "request.auth.principal", "iss/sub2")
	md.Set("other", "k", 1)
	if v, ok := md.Get("istio_authn", "request.auth.principal"); !ok || v != "iss/sub2" {
		t.Errorf("Get = %v, %v; want iss/sub2, true", v, ok)
	}
	if _, ok := md.Get("istio_authn", "k"); ok {
		t.Error("a key leaked across namespaces")
	}
	if v, _ := md.Get("other", "k"); v != 1 {
		t.Errorf("other/k = %v", v)
	}
}

func TestMetadataReset(t *testing.T) {
	var md Metadata
	md.Reset() // empty: nothing to do
	md.Set("ns", "k", 1)
	md.Reset()
	if _, ok := md.Get("ns", "k"); ok {
		t.Error("value kept after Reset")
	}
	md.Set("ns", "k", 2)
	if v, _ := md.Get("ns", "k"); v != 2 {
		t.Errorf("after Reset and Set: %v", v)
	}
}

// A connection's next request reuses the storage: setting what the last
// one set allocates nothing; past maxKeptEntries it is dropped.
func TestMetadataResetReuses(t *testing.T) {
	var md Metadata
	var w = new(int)
	if n := testing.AllocsPerRun(100, func() {
		md.Reset()
		md.Set("istio.metadata_exchange", "downstream_peer", w)
		md.Set("istio.metadata_exchange", "downstream_peer_id", true)
	}); n != 0 {
		t.Errorf("%v allocs per request after the first, want 0", n)
	}
	for i := 0; i <= maxKeptEntries; i++ {
		md.Set(string(rune('a'+i)), "k", i)
	}
	if v, ok := md.Get("b", "k"); !ok || v != 1 {
		t.Errorf("b/k = %v, %t among %d entries", v, ok, maxKeptEntries+1)
	}
	md.Reset()
	if md.kv != nil {
		t.Errorf("storage of %d entries kept after Reset, want none", cap(md.kv))
	}
	md.Set("ns", "k", 1)
	md.Reset()
	if _, ok := md.Get("ns", "k"); ok || cap(md.kv) == 0 {
		t.Errorf("after Reset: value kept %t, capacity %d (want the storage kept, empty)", ok, cap(md.kv))
	}
}
