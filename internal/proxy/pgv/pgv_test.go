package pgv_test

import (
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/envoyproxy/protoc-gen-validate/validate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/straitmesh/strait/internal/proxy/pgv"
	// Every message type the proxy links, with its generated validator
	// (linked here by the calls below) to compare with.
	_ "github.com/straitmesh/strait/internal/proxy/proxycmd"
)

type generated interface {
	proto.Message
	ValidateAll() error
}

// linkedTypes are the registered message types protoc-gen-validate
// generated validators for.
func linkedTypes(t *testing.T) []protoreflect.MessageType {
	var out []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if _, ok := mt.New().Interface().(generated); ok {
			out = append(out, mt)
		}
		return true
	})
	if len(out) < 300 {
		t.Fatalf("only %d message types with validators linked", len(out))
	}
	return out
}

// TestValidatedMatchesGenerated: pgv checks exactly the types that have a
// generated ValidateAll (an embedded message of another type is not
// checked by the generated code either), and compiles the rules of every
// one of them (no rule it does not implement).
func TestValidatedMatchesGenerated(t *testing.T) {
	n := 0
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		m := mt.New().Interface()
		_, gen := m.(generated)
		if got := pgv.Validated(reflect.TypeOf(m)); got != gen {
			t.Errorf("%s: validated = %v, has ValidateAll = %v", mt.Descriptor().FullName(), got, gen)
		}
		if gen {
			n++
			if err := pgv.Compile(mt.Descriptor(), reflect.TypeOf(m)); err != nil {
				t.Errorf("%s: %v", mt.Descriptor().FullName(), err)
			}
		}
		return true
	})
	t.Logf("%d types with validators", n)
}

// TestDifferential fills messages of every linked type at random, with
// values around each field's rule bounds, and compares pgv.ValidateAll's
// error with the generated ValidateAll's, text for text.
func TestDifferential(t *testing.T) {
	types := linkedTypes(t)
	iters := 60
	if n, err := strconv.Atoi(os.Getenv("PGV_ITERS")); err == nil {
		iters = n
	}
	if testing.Short() {
		iters = 10
	}
	rng := rand.New(rand.NewPCG(1, 2))
	failed, nonNil := 0, 0
	for _, mt := range types {
		for range iters {
			m := mt.New()
			fill(rng, m, 3)
			want := m.Interface().(generated).ValidateAll()
			got := pgv.ValidateAll(m.Interface())
			if (want == nil) != (got == nil) || (want != nil && want.Error() != got.Error()) {
				failed++
				if failed <= 20 {
					t.Errorf("%s:\n generated: %v\n pgv:       %v", mt.Descriptor().FullName(), want, got)
				}
			}
			if want != nil {
				nonNil++
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d messages differ", failed, len(types)*iters)
	}
	t.Logf("%d types x %d messages, %d refused", len(types), iters, nonNil)
}

func TestErrorText(t *testing.T) {
	c := &clusterv3.Cluster{
		Name:                 "",
		ConnectTimeout:       durationpb.New(-1),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment:       nil,
		Metadata:             &corev3.Metadata{},
	}
	err := pgv.ValidateAll(c)
	if err == nil {
		t.Fatal("an unnamed cluster passed")
	}
	want := c.ValidateAll().Error()
	if err.Error() != want {
		t.Fatalf("got %q, want %q", err, want)
	}
	if !strings.Contains(err.Error(), "invalid Cluster.Name: value length must be at least 1 runes") {
		t.Errorf("got %q", err)
	}
}

// fill sets fields of m at random, biased to the values its rules test.
func fill(rng *rand.Rand, m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if rng.IntN(3) == 0 {
			continue
		}
		if od := fd.ContainingOneof(); od != nil && m.WhichOneof(od) != nil {
			continue
		}
		rules := rulesOf(fd)
		switch {
		case fd.IsList():
			if depth == 0 && fd.Kind() == protoreflect.MessageKind {
				continue
			}
			l := m.Mutable(fd).List()
			for range rng.IntN(4) {
				if fd.Kind() == protoreflect.MessageKind {
					e := l.NewElement()
					fill(rng, e.Message(), depth-1)
					l.Append(e)
				} else {
					l.Append(scalar(rng, fd, rules.GetRepeated().GetItems()))
				}
			}
		case fd.IsMap():
			if depth == 0 {
				continue
			}
			mp := m.Mutable(fd).Map()
			for range rng.IntN(3) {
				k := scalar(rng, fd.MapKey(), rules.GetMap().GetKeys()).MapKey()
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					v := mp.NewValue()
					fill(rng, v.Message(), depth-1)
					mp.Set(k, v)
				} else {
					mp.Set(k, scalar(rng, fd.MapValue(), rules.GetMap().GetValues()))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			if depth == 0 {
				continue
			}
			v := m.NewField(fd)
			if rng.IntN(4) != 0 {
				fillSpecial(rng, v.Message(), rules, depth-1)
			}
			m.Set(fd, v)
		default:
			m.Set(fd, scalar(rng, fd, rules))
		}
	}
}

// fillSpecial fills well-known types (wrappers, durations, Any) with
// values near the rules of the field holding them.
func fillSpecial(rng *rand.Rand, m protoreflect.Message, rules *validate.FieldRules, depth int) {
	switch m.Descriptor().FullName() {
	case "google.protobuf.Duration":
		secs := []int64{0, 1, -1, 5, 315576000001, 3600}
		if r := rules.GetDuration(); r != nil {
			for _, d := range []*durationpb.Duration{r.Gt, r.Gte, r.Lt, r.Lte, r.Const} {
				if d != nil {
					secs = append(secs, d.Seconds, d.Seconds+1, d.Seconds-1)
				}
			}
		}
		m.Set(m.Descriptor().Fields().ByNumber(1), protoreflect.ValueOfInt64(secs[rng.IntN(len(secs))]))
		nanos := []int32{0, 1, -1, 999999999, 1000000000}
		m.Set(m.Descriptor().Fields().ByNumber(2), protoreflect.ValueOfInt32(nanos[rng.IntN(len(nanos))]))
	case "google.protobuf.Any":
		urls := []string{"", "type.googleapis.com/x.Y"}
		if r := rules.GetAny(); r != nil {
			urls = append(urls, r.In...)
			urls = append(urls, r.NotIn...)
		}
		m.Set(m.Descriptor().Fields().ByNumber(1), protoreflect.ValueOfString(urls[rng.IntN(len(urls))]))
	default:
		if wrappers[m.Descriptor().FullName()] {
			fd := m.Descriptor().Fields().Get(0)
			m.Set(fd, scalar(rng, fd, rules))
			return
		}
		fill(rng, m, depth)
	}
}

var wrappers = map[protoreflect.FullName]bool{
	"google.protobuf.DoubleValue": true, "google.protobuf.FloatValue": true, "google.protobuf.Int64Value": true,
	"google.protobuf.UInt64Value": true, "google.protobuf.Int32Value": true, "google.protobuf.UInt32Value": true,
	"google.protobuf.BoolValue": true, "google.protobuf.StringValue": true, "google.protobuf.BytesValue": true,
}

func rulesOf(fd protoreflect.FieldDescriptor) *validate.FieldRules {
	r, _ := proto.GetExtension(fd.Options(), validate.E_Rules).(*validate.FieldRules)
	return r
}

var strPool = []string{"", "a", "ab", "x-y", "A", ":path", "host.example", "a\x00b", "a\nb", "é", "10.0.0.1", "::1", "-a", "a-", "a..b", "http://x/", "/p", " ", "abcdefghijklmnopqrstuvwxyz0123456789", "*", "a.b.c"}

func scalar(rng *rand.Rand, fd protoreflect.FieldDescriptor, rules *validate.FieldRules) protoreflect.Value {
	var ints []int64
	for _, v := range ruleNumbers(rules) {
		ints = append(ints, v-1, v, v+1)
	}
	ints = append(ints, 0, 1, -1, 2, 100, 65535, 65536, math.MaxInt32)
	pick := func() int64 { return ints[rng.IntN(len(ints))] }
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(rng.IntN(2) == 0)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		if rng.IntN(5) == 0 {
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(pick()))
		}
		return protoreflect.ValueOfEnum(vals.Get(rng.IntN(vals.Len())).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(pick()))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(pick())
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(pick()))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(pick()))
	case protoreflect.FloatKind:
		f := []float32{0, 0.5, 1, -1, 100, 1.5, float32(math.NaN())}
		return protoreflect.ValueOfFloat32(f[rng.IntN(len(f))])
	case protoreflect.DoubleKind:
		f := []float64{0, 0.5, 1, -1, 100, 1.5, math.NaN()}
		for _, v := range ruleNumbers(rules) {
			f = append(f, float64(v))
		}
		return protoreflect.ValueOfFloat64(f[rng.IntN(len(f))])
	case protoreflect.StringKind:
		s := strPool[rng.IntN(len(strPool))]
		sr := rules.GetString_()
		if sr != nil && rng.IntN(2) == 0 {
			var cand []string
			cand = append(cand, sr.In...)
			cand = append(cand, sr.NotIn...)
			for _, n := range []uint64{sr.GetMinLen(), sr.GetMaxLen(), sr.GetMinBytes(), sr.GetMaxBytes(), sr.GetLen()} {
				if n > 0 && n < 1<<16 {
					cand = append(cand, strings.Repeat("a", int(n-1)), strings.Repeat("a", int(n)), strings.Repeat("a", int(n+1)))
				}
			}
			if sr.Prefix != nil {
				cand = append(cand, *sr.Prefix+"x")
			}
			if sr.Const != nil {
				cand = append(cand, *sr.Const)
			}
			if len(cand) > 0 {
				s = cand[rng.IntN(len(cand))]
			}
		}
		return protoreflect.ValueOfString(s)
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(strPool[rng.IntN(len(strPool))]))
	}
	panic("kind " + fd.Kind().String())
}

// ruleNumbers are the bounds in a field's numeric rules.
func ruleNumbers(r *validate.FieldRules) []int64 {
	if r == nil {
		return nil
	}
	var out []int64
	rm := r.ProtoReflect()
	rm.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind || fd.IsList() || fd.IsMap() {
			return true
		}
		sub := v.Message()
		sub.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch fd.Kind() {
			case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind, protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind:
				if fd.IsList() {
					for i := range v.List().Len() {
						out = append(out, v.List().Get(i).Int())
					}
				} else {
					out = append(out, v.Int())
				}
			case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind:
				if fd.IsList() {
					for i := range v.List().Len() {
						out = append(out, int64(v.List().Get(i).Uint()))
					}
				} else {
					out = append(out, int64(v.Uint()))
				}
			case protoreflect.FloatKind, protoreflect.DoubleKind:
				if !fd.IsList() {
					out = append(out, int64(v.Float()))
				}
			}
			return true
		})
		return true
	})
	return out
}

// A cluster as straitd sends it for a service, with its 10 endpoints.
func benchCluster() *clusterv3.Cluster {
	eps := make([]*endpointv3.LbEndpoint, 10)
	for i := range eps {
		eps[i] = &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 80}}}},
		}}}
	}
	return &clusterv3.Cluster{
		Name:                 "outbound|80||svc-1.bench.svc.cluster.local",
		ConnectTimeout:       durationpb.New(10e9),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			MaxConnections: wrapperspb.UInt32(4294967295), MaxRequests: wrapperspb.UInt32(4294967295), TrackRemaining: true}}},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: "outbound|80||svc-1.bench.svc.cluster.local",
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: eps}}},
	}
}

func BenchmarkValidateCluster(b *testing.B) {
	c := benchCluster()
	b.Run("pgv", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := pgv.ValidateAll(c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := c.ValidateAll(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
