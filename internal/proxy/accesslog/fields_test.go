package accesslog

import (
	"path/filepath"
	"strings"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/straitmesh/strait/internal/proxy/fieldtest"
)

// TestAccessLogFieldsClassified: every field of AccessLog, FileAccessLog
// and SubstitutionFormatString is honoured or refused, so that a new Envoy
// API's field is noticed here; the allow-lists name only real fields.
func TestAccessLogFieldsClassified(t *testing.T) {
	fieldtest.Classified(t, (&accesslogv3.AccessLog{}).ProtoReflect().Descriptor(), accessLogHonoured, accessLogRefused)
	fieldtest.Classified(t, (&filev3.FileAccessLog{}).ProtoReflect().Descriptor(), fileLogHonoured, fileLogRefused)
	fieldtest.Classified(t, (&corev3.SubstitutionFormatString{}).ProtoReflect().Descriptor(), formatHonoured, formatRefused)
	fieldtest.Classified(t, (&corev3.JsonFormatOptions{}).ProtoReflect().Descriptor(), jsonFormatOptionsFields, map[protoreflect.Name]bool{})
	fieldtest.Known(t, (&corev3.DataSource{}).ProtoReflect().Descriptor(), dataSourceFields)
}

// TestAccessLogRefusedFields: each refused field, set, is an error naming
// it by its path; the logger without it builds.
func TestAccessLogRefusedFields(t *testing.T) {
	files := NewFiles(FilesOptions{})
	defer files.Close()
	path := filepath.Join(t.TempDir(), "a.log")
	format := func() *corev3.SubstitutionFormatString {
		return &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%PROTOCOL%\n"}}
	}
	build := func(al *accesslogv3.AccessLog) error {
		_, err := Build([]*accesslogv3.AccessLog{al}, files)
		return err
	}
	if err := build(fileLog(t, &filev3.FileAccessLog{Path: path, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: format()}})); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, want string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want+" is not supported") {
			t.Errorf("got %v, want an error naming %s", err, want)
		}
	}
	for n := range accessLogRefused {
		t.Run(string(n), func(t *testing.T) {
			al := fileLog(t, &filev3.FileAccessLog{Path: path})
			fieldtest.SetSomething(al.ProtoReflect(), al.ProtoReflect().Descriptor().Fields().ByName(n))
			check(t, "access_log[0]."+string(n), build(al))
		})
	}
	for n := range fileLogRefused {
		t.Run(string(n), func(t *testing.T) {
			fl := &filev3.FileAccessLog{Path: path}
			fieldtest.SetSomething(fl.ProtoReflect(), fl.ProtoReflect().Descriptor().Fields().ByName(n))
			check(t, "access_log[0].typed_config."+string(n), build(fileLog(t, fl)))
		})
	}
	for n := range formatRefused {
		t.Run(string(n), func(t *testing.T) {
			sf := format()
			fieldtest.SetSomething(sf.ProtoReflect(), sf.ProtoReflect().Descriptor().Fields().ByName(n))
			check(t, "access_log[0].typed_config.log_format."+string(n),
				build(fileLog(t, &filev3.FileAccessLog{Path: path, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: sf}})))
		})
	}
	t.Run("text_format_source.watched_directory", func(t *testing.T) {
		sf := &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{
			Specifier: &corev3.DataSource_InlineString{InlineString: "%PROTOCOL%\n"}, WatchedDirectory: &corev3.WatchedDirectory{Path: "/tmp"}}}}
		check(t, "log_format.text_format_source.watched_directory",
			build(fileLog(t, &filev3.FileAccessLog{Path: path, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: sf}})))
	})
	t.Run("json_format_options", func(t *testing.T) {
		sf := format()
		sf.JsonFormatOptions = &corev3.JsonFormatOptions{SortProperties: true}
		if err := build(fileLog(t, &filev3.FileAccessLog{Path: path, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: sf}})); err != nil {
			t.Errorf("sort_properties (the keys are always sorted): %v", err)
		}
	})
}

// TestAccessLogUnknownFieldsRefused: a newer API's field, kept as unknown
// bytes, is refused.
func TestAccessLogUnknownFieldsRefused(t *testing.T) {
	files := NewFiles(FilesOptions{})
	defer files.Close()
	fl := &filev3.FileAccessLog{Path: filepath.Join(t.TempDir(), "a.log")}
	fl.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 9999, protowire.VarintType), 1))
	if _, err := Build([]*accesslogv3.AccessLog{fileLog(t, fl)}, files); err == nil || !strings.Contains(err.Error(), "typed_config has fields strait-proxy does not know") {
		t.Errorf("got %v, want the unknown field refused", err)
	}
}
