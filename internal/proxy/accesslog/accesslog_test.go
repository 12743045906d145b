package accesslog

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// istioText is Istio's default text format (pilot/pkg/model
// EnvoyTextLogFormat).
const istioText = "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% " +
	"%PROTOCOL%\" %RESPONSE_CODE% %RESPONSE_FLAGS% " +
	"%RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% " +
	"\"%UPSTREAM_TRANSPORT_FAILURE_REASON%\" %BYTES_RECEIVED% %BYTES_SENT% " +
	"%DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" " +
	"\"%REQ(USER-AGENT)%\" \"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\" " +
	"%UPSTREAM_CLUSTER_RAW% %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% " +
	"%DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%\n"

func sampleRecord() *Record {
	req := http.Header{}
	req.Set("User-Agent", "curl/8")
	req.Set("X-Request-Id", "abc")
	req.Add("X-Forwarded-For", "10.0.0.1")
	req.Add("X-Forwarded-For", "10.0.0.2")
	resp := http.Header{}
	resp.Set("X-Envoy-Upstream-Service-Time", "7")
	return &Record{
		Start:    time.Date(2026, 12, 1, 15, 4, 5, 678_000_000, time.UTC),
		Duration: 12*time.Millisecond + 900*time.Microsecond,
		Protocol: "HTTP/1.1", Method: "GET", Path: "/hello?x=1", Authority: "echo.demo:80",
		Request: HTTPHeader(req), Response: HTTPHeader(resp),
		Code: 503, Flags: "UF", Details: DetailsFor("UF"),
		BytesReceived: 5, BytesSent: 91,
		UpstreamHost: "10.1.2.3:8080", UpstreamCluster: "outbound|80||echo.demo",
		DownstreamLocal:  netip.MustParseAddrPort("240.240.0.1:80"),
		DownstreamRemote: netip.MustParseAddrPort("10.1.0.9:41234"),
		RouteName:        "default",
	}
}

func TestIstioDefaultTextFormat(t *testing.T) {
	f, err := ParseText(istioText)
	if err != nil {
		t.Fatal(err)
	}
	got := string(f.Append(nil, sampleRecord()))
	want := `[2026-12-01T15:04:05.678Z] "GET /hello?x=1 HTTP/1.1" 503 UF upstream_reset_before_response_started{connection_failure} - "-" 5 91 12 7 "10.0.0.1,10.0.0.2" "curl/8" "abc" "echo.demo:80" "10.1.2.3:8080" outbound|80||echo.demo - 240.240.0.1:80 10.1.0.9:41234 - default` + "\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestOperators(t *testing.T) {
	r := sampleRecord()
	r.Request = HTTPHeader(http.Header{"X-Envoy-Original-Path": {"/orig"}, "Long": {"abcdefgh"}})
	for _, tc := range []struct{ format, want string }{
		{"%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%", "/orig"},
		{"%REQ(X-MISSING?:PATH)%", "/hello?x=1"},
		{"%REQ(LONG):3%", "abc"},
		{"%REQ(:METHOD)% %REQ(:AUTHORITY)%", "GET echo.demo:80"},
		{"%RESP(X-MISSING)%", "-"},
		{"100%% %RESPONSE_CODE%", "100% 503"},
		{"%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% %DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT%", "10.1.0.9 240.240.0.1"},
		{"%UPSTREAM_CLUSTER%|%PROTOCOL%|%DURATION%", "outbound|80||echo.demo|HTTP/1.1|12"},
	} {
		f, err := ParseText(tc.format)
		if err != nil {
			t.Fatalf("%s: %v", tc.format, err)
		}
		if got := string(f.Append(nil, r)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.format, got, tc.want)
		}
	}
	// A TCP record has no protocol, code 0 and no headers.
	f, _ := ParseText("%PROTOCOL% %RESPONSE_CODE% %REQ(:METHOD)% %RESPONSE_FLAGS%")
	if got := string(f.Append(nil, &Record{})); got != "- 0 - -" {
		t.Errorf("empty record: %q", got)
	}
}

func TestFormatRefusals(t *testing.T) {
	for format, want := range map[string]string{
		"%DYNAMIC_METADATA(istio)%":  "%DYNAMIC_METADATA% is not supported by strait-proxy (it does not record dynamic metadata)",
		"%START_TIME(%Q)%":           "%Q is not supported by strait-proxy",
		"%START_TIME(%Y%n)%":         "%n (a newline) is not allowed",
		"%REQ%":                      "needs an argument",
		"%PROTOCOL(x)%":              "takes no argument",
		"%RESPONSE_CODE%%REQ(a):x%":  "a length must be digits",
		"%DURATION:3%":               "a length limit (:3) is not allowed",
		"50% done":                   "no command operator after %",
		"%REQ(a%":                    "has no closing parenthesis",
		"%REQ(a)b%":                  "is not closed by %",
		"%REQ(a?b?c)%":               "more than one alternative header",
		"%REQ(:scheme)%":             "pseudo-header :scheme is not recorded",
		"%RESPONSE_CODE_DETAILS(X)%": "the only argument is ALLOW_WHITESPACES",
		"%ENVIRONMENT%":              "needs an argument",
		"%UPSTREAM_PEER%":            "not an Envoy command operator it knows",
		"%UPSTREAM_HOST(a):2%":       "takes no argument",
		"%REQ(user-agent)%%FOO_BAR%": "%FOO_BAR% is not supported",
		"%REQ(a)(b)%":                "",
	} {
		_, err := ParseText(format)
		if want == "" {
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", format, err, want)
		}
	}
}

func TestJSONFormat(t *testing.T) {
	st, err := structpb.NewStruct(map[string]any{
		"code": "%RESPONSE_CODE%", "flags": "%RESPONSE_FLAGS%", "sni": "%REQUESTED_SERVER_NAME%",
		"line": "%REQ(:METHOD)% %REQ(:PATH)%", "bytes": "%BYTES_SENT%", "start": "%START_TIME%",
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseJSON(st)
	if err != nil {
		t.Fatal(err)
	}
	line := f.Append(nil, sampleRecord())
	if !strings.HasSuffix(string(line), "}\n") {
		t.Fatalf("no newline after the object: %q", line)
	}
	var got map[string]any
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	ok := sampleRecord()
	ok.Flags = ""
	var okLine map[string]any
	if err := json.Unmarshal(f.Append(nil, ok), &okLine); err != nil || okLine["flags"] != "-" {
		t.Errorf("no flags: %v %v, want \"-\"", okLine["flags"], err)
	}
	want := map[string]any{"code": 503.0, "flags": "UF", "sni": nil, "line": "GET /hello?x=1", "bytes": 91.0, "start": "2026-12-01T15:04:05.678Z"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	nested, _ := structpb.NewStruct(map[string]any{"a": map[string]any{"b": "%PROTOCOL%"}})
	if _, err := ParseJSON(nested); err == nil || !strings.Contains(err.Error(), `json_format "a"`) {
		t.Errorf("nested object: %v", err)
	}
}

func fileLog(t *testing.T, fl *filev3.FileAccessLog) *accesslogv3.AccessLog {
	t.Helper()
	a, err := anypb.New(fl)
	if err != nil {
		t.Fatal(err)
	}
	return &accesslogv3.AccessLog{Name: FileLoggerName, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: a}}
}

// TestBuildAndWrite builds Istio's file logger, logs through it, and finds
// the line in the file after a flush; two loggers of one path share it.
func TestBuildAndWrite(t *testing.T) {
	files := NewFiles(FilesOptions{FlushInterval: time.Hour})
	path := filepath.Join(t.TempDir(), "access.log")
	text := fileLog(t, &filev3.FileAccessLog{Path: path, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
		Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "%RESPONSE_CODE% %RESPONSE_FLAGS%\n"}}},
	}}})
	def := fileLog(t, &filev3.FileAccessLog{Path: path})
	logs, err := Build([]*accesslogv3.AccessLog{text, def}, files)
	if err != nil {
		t.Fatal(err)
	}
	if logs[0].file != logs[1].file {
		t.Error("two loggers of one path opened it twice")
	}
	logs.Log(sampleRecord())
	if data, _ := os.ReadFile(path); len(data) != 0 {
		t.Fatalf("written before a flush: %q", data)
	}
	if err := files.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "503 UF" || !strings.HasPrefix(lines[1], `[2026-12-01T15:04:05.678Z] "GET /hello?x=1 HTTP/1.1" 503 UF 5 91 12 7 `) {
		t.Errorf("file holds %q", data)
	}
}

// TestFlushEveryInterval: a line reaches the file without Close.
func TestFlushEveryInterval(t *testing.T) {
	files := NewFiles(FilesOptions{FlushInterval: 10 * time.Millisecond})
	defer files.Close()
	path := filepath.Join(t.TempDir(), "access.log")
	logs, err := Build([]*accesslogv3.AccessLog{fileLog(t, &filev3.FileAccessLog{Path: path})}, files)
	if err != nil {
		t.Fatal(err)
	}
	logs.Log(sampleRecord())
	deadline := time.Now().Add(10 * time.Second)
	for {
		if data, _ := os.ReadFile(path); strings.Contains(string(data), "503 UF") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the line never reached the file")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBuildRefusals(t *testing.T) {
	files := NewFiles(FilesOptions{})
	defer files.Close()
	path := filepath.Join(t.TempDir(), "a.log")
	withFilter := fileLog(t, &filev3.FileAccessLog{Path: path})
	withFilter.Filter = &accesslogv3.AccessLogFilter{}
	stdoutType, _ := anypb.New(&corev3.Node{})
	jsonCT := &filev3.FileAccessLog{Path: path, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
		Format:      &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%PROTOCOL%"},
		ContentType: "text/plain",
	}}}
	omit := proto.Clone(jsonCT).(*filev3.FileAccessLog)
	omit.GetLogFormat().ContentType = ""
	omit.GetLogFormat().OmitEmptyValues = true
	for _, tc := range []struct {
		name string
		log  *accesslogv3.AccessLog
		want string
	}{
		{"filter", withFilter, "access_log[0].filter is not supported"},
		{"other logger", &accesslogv3.AccessLog{Name: "envoy.access_loggers.http_grpc", ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: stdoutType}}, "only envoy.access_loggers.file"},
		{"no path", fileLog(t, &filev3.FileAccessLog{}), "path is empty"},
		{"content type", fileLog(t, jsonCT), "log_format.content_type is not supported"},
		{"omit empty", fileLog(t, omit), "log_format.omit_empty_values is not supported"},
		{"bad operator", fileLog(t, &filev3.FileAccessLog{Path: path, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%UPSTREAM_PEER%"}}}}), "%UPSTREAM_PEER% is not supported"},
		{"deprecated json", fileLog(t, &filev3.FileAccessLog{Path: path, AccessLogFormat: &filev3.FileAccessLog_JsonFormat{JsonFormat: &structpb.Struct{}}}), "typed_config.json_format is not supported"},
		{"unwritable", fileLog(t, &filev3.FileAccessLog{Path: filepath.Join(path, "x", "y")}), "access log path"},
	} {
		if _, err := Build([]*accesslogv3.AccessLog{tc.log}, files); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// BenchmarkIstioTextFormat is the cost of one line of Istio's default
// format (what a logged request adds, besides its share of the writes).
//
//	go test -run '^$' -bench IstioTextFormat -benchmem ./internal/proxy/accesslog/
func BenchmarkIstioTextFormat(b *testing.B) {
	f, err := ParseText(istioText)
	if err != nil {
		b.Fatal(err)
	}
	r := sampleRecord()
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = f.Append(buf[:0], r)
	}
}
