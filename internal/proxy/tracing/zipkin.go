package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
)

// zipkinExporter posts Zipkin v2 JSON (a list of spans) to the
// collector's collector_endpoint, as Envoy's Zipkin tracer with
// collector_endpoint_version HTTP_JSON does.
type zipkinExporter struct {
	p      Provider
	client *http.Client
	tr     *http.Transport
}

func newZipkinExporter(p Provider, dial DialFunc) *zipkinExporter {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if dial == nil {
				return nil, fmt.Errorf("no cluster dialer")
			}
			return dial(ctx, p.Cluster)
		},
		MaxIdleConns: 1, MaxIdleConnsPerHost: 1, DisableCompression: true,
	}
	return &zipkinExporter{p: p, tr: tr, client: &http.Client{Transport: tr}}
}

func (z *zipkinExporter) export(ctx context.Context, spans []*Span) error {
	body, err := encodeZipkin(spans)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+z.p.Host+z.p.Path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("zipkin collector %s: %w", z.p.Cluster, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := z.client.Do(req)
	if err != nil {
		return fmt.Errorf("zipkin collector %s: %w", z.p.Cluster, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("zipkin collector %s answered %s", z.p.Cluster, resp.Status)
	}
	return nil
}

func (z *zipkinExporter) close() { z.tr.CloseIdleConnections() }

// ZipkinSpan is a span in Zipkin's v2 JSON model
// (zipkin-api's zipkin2-api.yaml).
type ZipkinSpan struct {
	TraceID       string            `json:"traceId"`
	ID            string            `json:"id"`
	ParentID      string            `json:"parentId,omitempty"`
	Name          string            `json:"name"`
	Kind          string            `json:"kind"`
	Timestamp     int64             `json:"timestamp"`
	Duration      int64             `json:"duration"`
	Shared        bool              `json:"shared,omitempty"`
	Debug         bool              `json:"debug,omitempty"`
	LocalEndpoint *ZipkinEndpoint   `json:"localEndpoint,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
}

// ZipkinEndpoint is a span's local endpoint.
type ZipkinEndpoint struct {
	ServiceName string `json:"serviceName,omitempty"`
}

// encodeZipkin is spans as Zipkin v2 JSON: ids in lower-case hex,
// timestamp and duration in microseconds.
func encodeZipkin(spans []*Span) ([]byte, error) {
	out := make([]ZipkinSpan, len(spans))
	for i, sp := range spans {
		z := ZipkinSpan{
			TraceID: string(sp.TraceID.AppendHex(nil, true)), ID: hex64(sp.ID), Name: sp.Name, Kind: sp.Kind.String(),
			Timestamp: sp.Start.UnixMicro(), Duration: max(sp.Duration.Microseconds(), 1), Shared: sp.Shared, Debug: sp.Debug,
		}
		if sp.ParentID != 0 {
			z.ParentID = hex64(sp.ParentID)
		}
		if sp.Service != "" {
			z.LocalEndpoint = &ZipkinEndpoint{ServiceName: sp.Service}
		}
		if len(sp.Tags) > 0 {
			z.Tags = make(map[string]string, len(sp.Tags))
			for _, t := range sp.Tags {
				z.Tags[t.Key] = t.Value
			}
		}
		out[i] = z
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode %s spans: %w", strconv.Itoa(len(spans)), err)
	}
	return b, nil
}
