package nds

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// ndsDescriptor builds Istio's nds.proto NameTable from its field numbers,
// so the tests check the hand-written codec against protobuf's own.
func ndsDescriptor(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	msg := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	field := func(name string, num int32, typ *descriptorpb.FieldDescriptorProto_Type, label *descriptorpb.FieldDescriptorProto_Label, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Type: typ, Label: label, JsonName: proto.String(name)}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	fd := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("nds_test.proto"),
		Package: proto.String("istio.networking.nds.v1"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("NameTable"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("table", 1, msg, rep, ".istio.networking.nds.v1.NameTable.TableEntry"),
			},
			NestedType: []*descriptorpb.DescriptorProto{
				{
					Name: proto.String("NameInfo"),
					Field: []*descriptorpb.FieldDescriptorProto{
						field("ips", 1, str, rep, ""),
						field("registry", 2, str, opt, ""),
						field("shortname", 3, str, opt, ""),
						field("namespace", 4, str, opt, ""),
					},
				},
				{
					Name:    proto.String("TableEntry"),
					Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
					Field: []*descriptorpb.FieldDescriptorProto{
						field("key", 1, str, opt, ""),
						field("value", 2, msg, opt, ".istio.networking.nds.v1.NameTable.NameInfo"),
					},
				},
			},
		}},
	}
	f, err := protodesc.NewFile(fd, nil)
	if err != nil {
		t.Fatal(err)
	}
	md := f.Messages().ByName("NameTable")
	if string(md.FullName()) != TypeURL[len("type.googleapis.com/"):] {
		t.Fatalf("descriptor %s does not match TypeURL %s", md.FullName(), TypeURL)
	}
	return md
}

var sample = NameTable{
	"reviews.default.svc.cluster.local": {IPs: []string{"10.96.0.20", "fd00::20"}, Registry: RegistryKubernetes, Shortname: "reviews", Namespace: "default"},
	"api.example.com":                   {IPs: []string{"240.240.0.1"}, Registry: "External"},
	"empty.example.com":                 {},
}

func TestRoundTrip(t *testing.T) {
	got, err := Unmarshal(Marshal(sample))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sample) {
		t.Errorf("round trip = %+v, want %+v", got, sample)
	}
	if string(Marshal(sample)) != string(Marshal(got)) {
		t.Error("equal tables encode differently")
	}
}

// TestWireCompatible decodes protobuf's encoding of a NameTable and has
// protobuf decode ours.
func TestWireCompatible(t *testing.T) {
	md := ndsDescriptor(t)
	infoMD := md.Messages().ByName("NameInfo")
	m := dynamicpb.NewMessage(md)
	table := m.Mutable(md.Fields().ByName("table")).Map()
	for host, ni := range sample {
		info := dynamicpb.NewMessage(infoMD)
		ips := info.Mutable(infoMD.Fields().ByName("ips")).List()
		for _, ip := range ni.IPs {
			ips.Append(protoreflect.ValueOfString(ip))
		}
		info.Set(infoMD.Fields().ByName("registry"), protoreflect.ValueOfString(ni.Registry))
		info.Set(infoMD.Fields().ByName("shortname"), protoreflect.ValueOfString(ni.Shortname))
		info.Set(infoMD.Fields().ByName("namespace"), protoreflect.ValueOfString(ni.Namespace))
		table.Set(protoreflect.ValueOfString(host).MapKey(), protoreflect.ValueOfMessage(info))
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sample) {
		t.Errorf("decoded protobuf's encoding = %+v, want %+v", got, sample)
	}
	if string(b) != string(Marshal(sample)) {
		t.Errorf("encoding differs from protobuf's deterministic one:\n got %x\nwant %x", Marshal(sample), b)
	}

	back := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(Marshal(sample), back); err != nil {
		t.Fatalf("protobuf cannot decode ours: %v", err)
	}
	if !proto.Equal(back, m) {
		t.Errorf("protobuf decodes ours as %v, want %v", back, m)
	}
}

func TestUnmarshalErrors(t *testing.T) {
	good := Marshal(sample)
	for name, b := range map[string][]byte{
		"truncated":      good[:len(good)-3],
		"bad tag":        {0xff},
		"bad length":     {0x0a, 0x7f},
		"bad entry":      {0x0a, 0x02, 0x12, 0x05},
		"bad group wire": {0x0b},
	} {
		if _, err := Unmarshal(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// Unknown fields, of any wire type, are skipped.
	extra := append([]byte{0x10, 0x05, 0x2a, 0x01, 'x'}, good...)
	got, err := Unmarshal(extra)
	if err != nil || !reflect.DeepEqual(got, sample) {
		t.Errorf("with unknown fields: %v, %v", got, err)
	}
}
