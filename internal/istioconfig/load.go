package istioconfig

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/straitmesh/strait/internal/istioconfig/schema"
	"github.com/straitmesh/strait/internal/istioconfig/support"
	"github.com/straitmesh/strait/internal/istioconfig/validate"
	"github.com/straitmesh/strait/internal/proxypush"
)

// FileResult is what parsing one file produced.
type FileResult struct {
	// Configs are the valid documents, in file order.
	Configs []*Config
	// Warnings name documents that were skipped on purpose (kinds or API
	// groups Strait does not handle), as "FILE: document N: message".
	Warnings []string
	// Err joins one *FieldError per problem; nil when every document was
	// valid. Documents with problems are not in Configs.
	Err error
}

// Size limits of what the loader reads. A config file is read whole and
// parsing takes about twenty times its size in memory, so both bound the
// memory a file (or a hostile one) can take. Kubernetes stores objects of
// at most 1.5 MiB, so a real config document is far below the limit.
const (
	// MaxFileBytes is the largest config file read.
	MaxFileBytes = 8 << 20
	// MaxDocumentBytes is the largest document of a file.
	MaxDocumentBytes = 2 << 20
	// maxProblems is how many problems of one file are listed; the rest
	// are counted.
	maxProblems = 100
)

// LoadFile reads and parses one YAML file; see ReadFile and ParseFile.
func LoadFile(path string) FileResult {
	data, err := ReadFile(path)
	if err != nil {
		return FileResult{Err: err}
	}
	return ParseFile(path, data)
}

// ReadFile reads a config file of at most MaxFileBytes; a larger one (or
// an endless one, such as a device) is an error naming the file, read no
// further than the limit.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &FieldError{File: path, Problem: err.Error(), Err: err}
	}
	defer f.Close()
	return ReadLimited(path, f)
}

// ReadLimited is ReadFile for a stream (standard input); name is used in
// messages.
func ReadLimited(name string, r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, &FieldError{File: name, Problem: err.Error(), Err: err}
	}
	if len(data) > MaxFileBytes {
		return nil, tooLarge(name)
	}
	return data, nil
}

func tooLarge(name string) error {
	return &FieldError{File: name, Problem: fmt.Sprintf("file is larger than %d MiB, the most a config file may hold; split its documents into several files", MaxFileBytes>>20)}
}

// ParseOptions changes how ParseFileWith reads a file.
type ParseOptions struct {
	// KeepRefused loads documents that set fields Strait refuses (see
	// support.Check) instead of refusing them. It is for the generator's
	// tests, which cover what straitd emits for a field before the data
	// plane side lands; a registry never sets it.
	KeepRefused bool
}

// ParseFile parses a multi-document YAML file (documents separated by
// "---" lines) and validates every document. name is used in messages only.
// Duplicate names within one kind and namespace are reported on the later
// document. A document that sets a field Strait does not support yet is
// refused, naming the field.
func ParseFile(name string, data []byte) FileResult {
	return ParseFileWith(name, data, ParseOptions{})
}

// ParseFileWith is ParseFile with options.
func ParseFileWith(name string, data []byte, opts ParseOptions) FileResult {
	var res FileResult
	var errs []error
	seen := map[proxypush.ConfigKey]int{}
	if len(data) > MaxFileBytes {
		return FileResult{Err: tooLarge(name)}
	}
	data, err := UTF8(data)
	if err != nil {
		return FileResult{Err: &FieldError{File: name, Problem: err.Error()}}
	}
	docs, err := splitDocuments(data)
	if err != nil {
		// The rest of the file was not read: refuse it all rather than
		// load a document cut short.
		return FileResult{Err: &FieldError{File: name, Problem: err.Error()}}
	}
	for i, doc := range docs {
		src := Source{File: name, Document: i + 1}
		if doc.size > MaxDocumentBytes {
			errs = append(errs, &FieldError{File: name, Document: src.Document, Problem: fmt.Sprintf(
				"document (from line %d) is larger than %d MiB, the most a config may hold (Kubernetes stores at most 1.5 MiB per object)", doc.line, MaxDocumentBytes>>20)})
			continue
		}
		cfg, warning, err := parseDocument(src, doc.text, doc.line, opts)
		switch {
		case err != nil:
			errs = append(errs, err)
			continue
		case warning != "":
			res.Warnings = append(res.Warnings, src.String()+": "+warning)
			continue
		}
		if prev, ok := seen[cfg.Key()]; ok {
			errs = append(errs, &FieldError{File: name, Document: src.Document, Field: "metadata.name",
				Problem: fmt.Sprintf("duplicate %s %s/%s (also document %d)", cfg.Kind, cfg.Namespace, cfg.Name, prev)})
			continue
		}
		seen[cfg.Key()] = src.Document
		res.Configs = append(res.Configs, cfg)
	}
	if len(errs) > 0 {
		res.Err = joinErrors(errs)
		if fes := FieldErrors(res.Err); len(fes) > maxProblems {
			// A file of junk must not bury the log under one line per
			// document.
			kept := make([]error, 0, maxProblems+1)
			for _, fe := range fes[:maxProblems] {
				kept = append(kept, fe)
			}
			kept = append(kept, &FieldError{File: name, Problem: fmt.Sprintf("%d more problems not listed", len(fes)-maxProblems)})
			res.Err = errors.Join(kept...)
		}
	}
	return res
}

// separator is a line that ends a document: "---" (a document start) or
// "..." (a document end, after which a document may start without "---"),
// with an optional comment. A document is never handed to the YAML
// decoder with another one after it, which it would silently drop.
var separator = regexp.MustCompile(`^(---|\.\.\.)(\s.*)?$`)

// maxLineBytes bounds one line of a config file.
const maxLineBytes = MaxDocumentBytes

// yamlDocument is one document of a file and the file line it starts on.
// size is its length; text is left empty when size passes
// MaxDocumentBytes.
type yamlDocument struct {
	text []byte
	line int
	size int
}

// splitDocuments splits on "---" lines and drops documents that hold only
// whitespace and comments. A line longer than maxLineBytes is an error.
func splitDocuments(data []byte) ([]yamlDocument, error) {
	var docs []yamlDocument
	var cur bytes.Buffer
	start, size := 1, 0
	flush := func(next int) {
		switch {
		case size > MaxDocumentBytes:
			docs = append(docs, yamlDocument{line: start, size: size})
		case !blank(cur.Bytes()):
			docs = append(docs, yamlDocument{text: bytes.Clone(cur.Bytes()), line: start, size: size})
		}
		cur.Reset()
		start, size = next, 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), maxLineBytes)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if separator.Match(bytes.TrimRight(line, "\r")) {
			flush(n + 1)
			if rest := bytes.TrimSpace(line[3:]); line[0] == '-' && len(rest) > 0 && rest[0] != '#' {
				// "--- {a: 1}": the next document starts on this line.
				start = n
				line = rest
			} else {
				continue
			}
		}
		size += len(line) + 1
		if size <= MaxDocumentBytes {
			cur.Write(line)
			cur.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w (a line may have at most %d MiB)", n+1, err, maxLineBytes>>20)
	}
	flush(n + 1)
	return docs, nil
}

func blank(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}

type metadata struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace"`
	Labels            map[string]string `json:"labels"`
	Annotations       map[string]string `json:"annotations"`
	CreationTimestamp *time.Time        `json:"creationTimestamp"`
}

// parseDocument returns a valid config, or a warning when the document is
// skipped on purpose, or an error.
// line is the file line the document starts on, for YAML syntax errors.
func parseDocument(src Source, raw []byte, line int, opts ParseOptions) (*Config, string, error) {
	el := newErrorList(src)
	// Strict: a key written twice in one mapping is an error, as kubectl
	// makes it, not a silent choice of the last value.
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		el.Add("", "invalid YAML: %s", YAMLProblem(err, raw, line))
		return nil, "", el.Err()
	}
	doc, err := decodeEnvelope(js)
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			el.Add(fe.Field, "%s", fe.Problem)
		} else {
			el.Add("", "%v", err)
		}
		return nil, "", el.Err()
	}
	if doc.APIVersion == "" {
		el.Add("apiVersion", "must be set (e.g. %s/v1)", NetworkingGroup)
	}
	if doc.Kind == "" {
		el.Add("kind", "must be set (e.g. ServiceEntry)")
	}
	if el.Len() > 0 {
		return nil, "", el.Err()
	}
	group, version, ok := strings.Cut(doc.APIVersion, "/")
	if !ok {
		if doc.APIVersion == NetworkingGroup || doc.APIVersion == SecurityGroup || doc.APIVersion == TelemetryGroup {
			// A networking or security config without its version would otherwise be
			// skipped as a kind of another group.
			el.Add("apiVersion", "%q has no version; use %s/v1", doc.APIVersion, doc.APIVersion)
			return nil, "", el.Err()
		}
		group, version = "", doc.APIVersion
	}
	versions, ok := acceptedVersions[group]
	if !ok {
		if doc.Items != nil {
			// A List (kubectl get -o yaml) is not read item by item: say so
			// when it holds configs, which would otherwise be lost quietly.
			if i, item, found := istioItem(doc.Items); found {
				el.Add(fmt.Sprintf("items[%d]", i), "a %s holding %s is not read; write each item as its own document, the documents separated by \"---\" lines", doc.Kind, item)
				return nil, "", el.Err()
			}
		}
		if want, typo := misspeltGroup(group); typo {
			el.Add("apiVersion", "%q is not an Istio API group; did you mean %s/%s?", group, want, version)
			return nil, "", el.Err()
		}
		return nil, fmt.Sprintf("skipping %s %s: only %s, %s and %s kinds are supported", doc.APIVersion, doc.Kind, NetworkingGroup, SecurityGroup, TelemetryGroup), nil
	}
	if field, ok := doc.unknownField(); ok {
		el.Add(field, "unknown field; a config has apiVersion, kind, metadata and spec (and status)")
		return nil, "", el.Err()
	}
	kind := proxypush.Kind(doc.Kind)
	spec := schema.NewSpec(kind)
	if spec == nil {
		if !istioKinds[group][doc.Kind] {
			el.Add("kind", "%q is not a %s kind%s", doc.Kind, group, suggestKind(group, doc.Kind))
			return nil, "", el.Err()
		}
		return nil, fmt.Sprintf("skipping %s %s: kind not supported yet", doc.APIVersion, doc.Kind), nil
	}
	if g := GroupOf(kind); g != group {
		el.Add("apiVersion", "%s is in %s, not %s", kind, g, group)
		return nil, "", el.Err()
	}
	if !versions[version] {
		want := "v1, v1beta1 or v1alpha3"
		switch group {
		case SecurityGroup:
			want = "v1 or v1beta1"
		case TelemetryGroup:
			want = "v1 or v1alpha1"
		}
		el.Add("apiVersion", "%q is not supported; use %s/%s", doc.APIVersion, group, want)
		return nil, "", el.Err()
	}

	var md metadata
	if len(doc.Metadata) == 0 || string(doc.Metadata) == "null" {
		el.Add("metadata.name", "must be set")
		return nil, "", el.Err()
	}
	if !decodeMetadata(el, doc.Metadata, &md) {
		return nil, "", el.Err()
	}
	validate.Meta(el, md.Name, md.Namespace)
	if md.Namespace == "" {
		md.Namespace = DefaultNamespace
	}

	if len(doc.Spec) == 0 || string(doc.Spec) == "null" {
		el.Add("spec", "must be set")
		return nil, "", el.Err()
	}
	specJSON, err := normalizeDurations("spec", doc.Spec, spec.ProtoReflect().Descriptor())
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			el.Add(fe.Field, "%s", fe.Problem)
		} else {
			el.Add("spec", "%v", err)
		}
		return nil, "", el.Err()
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(specJSON, spec); err != nil {
		if path, problem, ok := locateProtoError("spec", specJSON, spec.ProtoReflect().Descriptor()); ok {
			el.Add(path, "%s", problem)
		} else {
			el.Add("spec", "%s", cleanProtoError(err))
		}
		return nil, "", el.Err()
	}
	var created time.Time
	if md.CreationTimestamp != nil {
		created = md.CreationTimestamp.UTC()
	}
	cfg := &Config{
		Meta: Meta{CreationTime: created, Kind: kind, APIVersion: doc.APIVersion, Name: md.Name, Namespace: md.Namespace, Labels: md.Labels, Annotations: md.Annotations, Source: src},
		Spec: spec,
	}
	if !opts.KeepRefused {
		support.Check(el, kind, spec.ProtoReflect())
	}
	validate.Spec(el, cfg.Namespace, cfg.Annotations, cfg.Spec)
	validateDurations(el, "spec", spec.ProtoReflect())
	if el.Len() > 0 {
		return nil, "", el.Err()
	}
	return cfg, "", nil
}

// cleanProtoError strips protojson's "proto: " prefix and its positions
// ("(line 1:23)", also inside "syntax error (line 1:27): ..."), which refer
// to the converted JSON and would only confuse.
var (
	protoErrPrefix   = regexp.MustCompile(`^proto:\s*`)
	protoErrPosition = regexp.MustCompile(`\s*\(line \d+:\d+\)`)
)

func cleanProtoError(err error) string {
	msg := protoErrPrefix.ReplaceAllString(strings.ReplaceAll(err.Error(), "\u00a0", " "), "")
	msg = protoErrPosition.ReplaceAllString(msg, "")
	return strings.TrimPrefix(msg, ": ")
}
