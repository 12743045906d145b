package accesslog

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// The tests in this file pin down edges that mutation testing
// (make mutate PKG=./internal/proxy/accesslog) found untested.

func TestFilesDefaultFlushInterval(t *testing.T) {
	fs := NewFiles(FilesOptions{})
	defer fs.Close()
	if fs.opts.FlushInterval != time.Second {
		t.Errorf("default flush interval %s, want 1s", fs.opts.FlushInterval)
	}
	fs2 := NewFiles(FilesOptions{FlushInterval: time.Millisecond})
	defer fs2.Close()
	if fs2.opts.FlushInterval != time.Millisecond {
		t.Errorf("flush interval %s, want the one given", fs2.opts.FlushInterval)
	}
}

// TestWriteFailureAndRecovery: a failed write drops the buffer and marks
// the file failed once; the next good write clears it.
func TestWriteFailureAndRecovery(t *testing.T) {
	fs := NewFiles(FilesOptions{FlushInterval: time.Hour})
	defer fs.Close()
	path := filepath.Join(t.TempDir(), "a.log")
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	good := f.f
	bad, err := os.Open(path) // read-only: writes fail
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	l := &Logger{format: mustText(t, "%RESPONSE_CODE%\n"), file: f}
	f.mu.Lock()
	f.f = bad
	f.mu.Unlock()
	l.Log(&Record{Code: 500})
	f.Flush()
	if !f.failed || len(f.buf) != 0 {
		t.Fatalf("after a failed write: failed %v, buffer %q", f.failed, f.buf)
	}
	f.mu.Lock()
	f.f = good
	f.mu.Unlock()
	l.Log(&Record{Code: 200})
	f.Flush()
	if f.failed {
		t.Error("a good write did not clear the failure")
	}
	if data, _ := os.ReadFile(path); string(data) != "200\n" {
		t.Errorf("file %q, want only the line written after recovery", data)
	}
}

// TestFlushAtSize: a buffer that reaches 64 KiB is written without
// waiting for the timer; one line less is not.
func TestFlushAtSize(t *testing.T) {
	fs := NewFiles(FilesOptions{FlushInterval: time.Hour})
	defer fs.Close()
	path := filepath.Join(t.TempDir(), "a.log")
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	l := &Logger{format: mustText(t, strings.Repeat("x", 1023)+"\n"), file: f} // 1 KiB a line
	for range 63 {
		l.Log(&Record{})
	}
	if data, _ := os.ReadFile(path); len(data) != 0 {
		t.Fatalf("written at 63 KiB: %d bytes", len(data))
	}
	l.Log(&Record{}) // exactly 64 KiB
	if data, _ := os.ReadFile(path); len(data) != 64<<10 {
		t.Fatalf("64 KiB buffered: %d bytes written, want all of them", len(data))
	}
}

func mustText(t *testing.T, s string) *Format {
	t.Helper()
	f, err := ParseText(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFormatSources(t *testing.T) {
	files := NewFiles(FilesOptions{})
	defer files.Close()
	path := filepath.Join(t.TempDir(), "a.log")
	build := func(sf *corev3.SubstitutionFormatString) (Loggers, error) {
		return Build([]*accesslogv3.AccessLog{fileLog(t, &filev3.FileAccessLog{Path: path, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: sf}})}, files)
	}
	for name, sf := range map[string]*corev3.SubstitutionFormatString{
		"inline_bytes": {Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte("%RESPONSE_CODE%")}}}},
		"text_format":  {Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%RESPONSE_CODE%"}},
	} {
		logs, err := build(sf)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := string(logs[0].format.Append(nil, &Record{Code: 204})); got != "204" {
			t.Errorf("%s: %q", name, got)
		}
	}
	for name, tc := range map[string]struct {
		sf   *corev3.SubstitutionFormatString
		want string
	}{
		"file source":    {&corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/f"}}}}, "only inline_string and inline_bytes"},
		"bad text":       {&corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%NOPE%"}}, "log_format: command operator %NOPE%"},
		"bad source":     {&corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "%NOPE%"}}}}, "log_format: command operator %NOPE%"},
		"bad json value": {&corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: &structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewNumberValue(1)}}}}, `log_format: json_format "a"`},
	} {
		if _, err := build(tc.sf); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	if _, err := Build([]*accesslogv3.AccessLog{fileLog(t, &filev3.FileAccessLog{Path: path})}, nil); err == nil || !strings.Contains(err.Error(), "not available") {
		t.Errorf("no files: %v", err)
	}
}

func TestOperatorEdges(t *testing.T) {
	r := &Record{Method: "GET", Request: HTTPHeader(http.Header{"Three": {"abc"}, "Empty": {""}}), Response: HTTPHeader(http.Header{})}
	for format, want := range map[string]string{
		"%REQ(THREE):3%":     "abc", // exactly the limit: kept whole
		"%REQ(THREE):2%":     "ab",
		"%REQ(THREE):0%":     "",
		"%REQ(EMPTY)%":       "",  // present, empty: printed empty, as Envoy does
		"%REQ(EMPTY?THREE)%": "",  // present (if empty): not the alternative
		"%RESP(:STATUS)%":    "-", // no response
		"%START_TIME()%":     r.Start.UTC().Format(startTimeLayout),
	} {
		f, err := ParseText(format)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if got := string(f.Append(nil, r)); got != want {
			t.Errorf("%s: %q, want %q", format, got, want)
		}
	}
	for format, want := range map[string]string{
		"%REQ()%":          "needs an argument",
		"%REQ(a)3%":        "is not closed by %",
		"%START_TIME():3%": "a length limit (:3) is not allowed",
		"%REQ)(%":          "is not closed by %",
	} {
		if _, err := ParseText(format); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", format, err, want)
		}
	}
}
