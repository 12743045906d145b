package accesslog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"

	"github.com/straitmesh/strait/internal/proxy/fieldaudit"
)

// FileLoggerName is the access logger strait-proxy implements.
const FileLoggerName = "envoy.access_loggers.file"

const fileLoggerType = "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog"

// Envoy's file logger buffers and flushes every second
// (file_flush_interval) or when the buffer passes 64 KiB.
const (
	flushInterval = time.Second
	flushSize     = 64 << 10
)

// FilesOptions configure Files.
type FilesOptions struct {
	// FlushInterval overrides the one-second flush (tests).
	FlushInterval time.Duration
	Logger        *slog.Logger
}

// Files are the proxy's open log files, one per path, shared by every
// logger that names it (listeners come and go; the file stays). Safe for
// concurrent use; Close flushes and closes them.
type Files struct {
	opts   FilesOptions
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex // guards files
	files map[string]*File
}

// NewFiles returns an empty set of files.
func NewFiles(o FilesOptions) *Files {
	if o.FlushInterval <= 0 {
		o.FlushInterval = flushInterval
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Files{opts: o, log: log.With("component", "accesslog"), ctx: ctx, cancel: cancel, files: map[string]*File{}}
}

// File is one open log file with its buffer.
type File struct {
	path string
	log  *slog.Logger

	mu     sync.Mutex // guards f, buf and failed
	f      *os.File
	buf    []byte
	failed bool // a write failed; logged once until one succeeds
}

// Open returns the file at path, opening it (append, create) the first
// time.
func (fs *Files) Open(path string) (*File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.files[path]; f != nil {
		return f, nil
	}
	if fs.ctx.Err() != nil {
		return nil, errors.New("access log files are closed")
	}
	osf, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("access log path %q: %w", path, err)
	}
	f := &File{path: path, f: osf, log: fs.log}
	fs.files[path] = f
	fs.wg.Add(1)
	go func() {
		defer fs.wg.Done()
		t := time.NewTicker(fs.opts.FlushInterval)
		defer t.Stop()
		for {
			select {
			case <-fs.ctx.Done():
				return
			case <-t.C:
				f.Flush()
			}
		}
	}()
	return f, nil
}

// Flush writes every file's buffer out now.
func (fs *Files) Flush() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, f := range fs.files {
		f.Flush()
	}
}

// Close flushes and closes every file.
func (fs *Files) Close() error {
	fs.cancel()
	fs.wg.Wait()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var errs []error
	for _, f := range fs.files {
		f.Flush()
		f.mu.Lock()
		if f.f != os.Stdout && f.f != os.Stderr {
			errs = append(errs, f.f.Close())
		}
		f.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Flush writes the buffer out.
func (f *File) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushLocked()
}

func (f *File) flushLocked() {
	if len(f.buf) == 0 {
		return
	}
	_, err := f.f.Write(f.buf)
	f.buf = f.buf[:0]
	switch {
	case err != nil && !f.failed:
		f.failed = true
		f.log.Warn("access log write failed; lines are dropped until a write succeeds", "path", f.path, "error", err)
	case err == nil:
		f.failed = false
	}
}

// Logger is one configured access log: a format and its file. Read-only
// once built; safe for concurrent use.
type Logger struct {
	format *Format
	file   *File
}

// Log formats r and adds it to the file's buffer.
func (l *Logger) Log(r *Record) {
	f := l.file
	f.mu.Lock()
	f.buf = l.format.Append(f.buf, r)
	if len(f.buf) >= flushSize {
		f.flushLocked()
	}
	f.mu.Unlock()
}

// Loggers are a filter's access logs; nil logs nothing.
type Loggers []*Logger

// Log gives r to every logger.
func (ls Loggers) Log(r *Record) {
	for _, l := range ls {
		l.Log(r)
	}
}

// Build validates an HCM's or tcp_proxy's access_log list and opens its
// files. Only the file logger with a format (text or JSON) is
// implemented; anything else is an error naming the field, so that the
// update is NACKed rather than logged wrongly.
func Build(logs []*accesslogv3.AccessLog, files *Files) (Loggers, error) {
	var out Loggers
	for i, al := range logs {
		path := fmt.Sprintf("access_log[%d]", i)
		if err := fieldaudit.Check(path, al.ProtoReflect(), accessLogHonoured, accessLogRefused); err != nil {
			return nil, err
		}
		tc := al.GetTypedConfig()
		if tc.GetTypeUrl() != fileLoggerType {
			return nil, fmt.Errorf("%s %q (%s): only %s is supported by strait-proxy", path, al.GetName(), tc.GetTypeUrl(), FileLoggerName)
		}
		var fl filev3.FileAccessLog
		if err := tc.UnmarshalTo(&fl); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		path += ".typed_config"
		if err := fieldaudit.Check(path, fl.ProtoReflect(), fileLogHonoured, fileLogRefused); err != nil {
			return nil, err
		}
		if fl.GetPath() == "" {
			return nil, fmt.Errorf("%s.path is empty (a file, or /dev/stdout)", path)
		}
		format, err := buildFormat(fl.GetLogFormat(), path+".log_format")
		if err != nil {
			return nil, err
		}
		if files == nil {
			return nil, fmt.Errorf("%s: access logs are not available in this proxy", path)
		}
		f, err := files.Open(fl.GetPath())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, &Logger{format: format, file: f})
	}
	return out, nil
}

func buildFormat(sf *corev3.SubstitutionFormatString, path string) (*Format, error) {
	if sf == nil {
		return ParseText(DefaultFormat)
	}
	if err := fieldaudit.Check(path, sf.ProtoReflect(), formatHonoured, formatRefused); err != nil {
		return nil, err
	}
	if err := fieldaudit.Only(path+".json_format_options", sf.GetJsonFormatOptions().ProtoReflect(), jsonFormatOptionsFields); err != nil {
		return nil, err
	}
	switch {
	case sf.GetJsonFormat() != nil:
		f, err := ParseJSON(sf.GetJsonFormat())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return f, nil
	case sf.GetTextFormatSource() != nil:
		ds := sf.GetTextFormatSource()
		if err := fieldaudit.Only(path+".text_format_source", ds.ProtoReflect(), dataSourceFields); err != nil {
			return nil, err
		}
		var s string
		switch {
		case ds.GetInlineString() != "":
			s = ds.GetInlineString()
		case ds.GetInlineBytes() != nil:
			s = string(ds.GetInlineBytes())
		default:
			return nil, fmt.Errorf("%s.text_format_source: only inline_string and inline_bytes are supported", path)
		}
		f, err := ParseText(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return f, nil
	default:
		f, err := ParseText(sf.GetTextFormat())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return f, nil
	}
}
