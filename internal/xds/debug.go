package xds

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/straitmesh/strait/internal/debugapi"
	"github.com/straitmesh/strait/internal/nds"
	"github.com/straitmesh/strait/internal/proxypush"
	"github.com/straitmesh/strait/internal/xdsapi"
)

// Connections returns the status of every registered connection, sorted by
// connection id.
func (s *Server) Connections() []debugapi.ConnectionStatus {
	s.mu.RLock()
	cons := make([]*Connection, 0, len(s.clients))
	for _, c := range s.clients {
		cons = append(cons, c)
	}
	s.mu.RUnlock()
	slices.SortFunc(cons, func(a, b *Connection) int { return strings.Compare(a.id, b.id) })

	out := make([]debugapi.ConnectionStatus, 0, len(cons))
	for _, c := range cons {
		cs := debugapi.ConnectionStatus{
			ConnectionID: c.id,
			ProxyID:      c.proxy.ID,
			IP:           c.proxy.IP,
			Peer:         c.peer,
			Delta:        c.IsDelta(),
			ConnectedAt:  c.connectedAt,
			Watched:      []debugapi.WatchedStatus{},
		}
		for _, w := range c.Watched() {
			cs.Watched = append(cs.Watched, debugapi.WatchedStatus{
				TypeURL:       w.TypeURL,
				ResourceNames: w.ResourceNames,
				Wildcard:      w.Wildcard,
				VersionSent:   w.VersionSent,
				NonceSent:     w.NonceSent,
				LastSent:      w.LastSent,
				VersionAcked:  w.VersionAcked,
				NonceAcked:    w.NonceAcked,
				NackError:     w.NackError,
				NonceNacked:   w.NonceNacked,
				LastNack:      w.LastNack,
			})
		}
		out = append(out, cs)
	}
	return out
}

// SyncStatuses returns /debug/syncz's content, sorted by connection id.
func (s *Server) SyncStatuses() []debugapi.SyncStatus {
	cons := s.Connections()
	out := make([]debugapi.SyncStatus, 0, len(cons))
	for _, c := range cons {
		ss := debugapi.SyncStatus{ProxyID: c.ProxyID, ConnectionID: c.ConnectionID, Types: []debugapi.TypeSyncStatus{}}
		for _, w := range c.Watched {
			ss.Types = append(ss.Types, debugapi.TypeSyncStatus{
				Type:     typeLabel(w.TypeURL),
				Sent:     w.VersionSent,
				Acked:    w.VersionAcked,
				Synced:   w.NonceSent != "" && w.NonceAcked == w.NonceSent,
				LastNack: w.NackError,
			})
		}
		out = append(out, ss)
	}
	return out
}

// ConnectionsHandler serves /debug/connections.
func (s *Server) ConnectionsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.Connections()) })
}

// SynczHandler serves /debug/syncz.
func (s *Server) SynczHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.SyncStatuses()) })
}

// RegisterDebugHandlers adds /debug/connections, /debug/syncz and
// /debug/config_dump to mux.
func (s *Server) RegisterDebugHandlers(mux *http.ServeMux) {
	mux.Handle("GET /debug/connections", s.ConnectionsHandler())
	mux.Handle("GET /debug/syncz", s.SynczHandler())
	mux.Handle("GET /debug/config_dump", s.ConfigDumpHandler())
}

// ConfigDumpHandler serves /debug/config_dump?proxyID=ID: the resources
// the server would send now to the connected proxy ID (a node id, or a
// connection id), for every type it watches with its subscription, as
// protobuf JSON.
func (s *Server) ConfigDumpHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("proxyID")
		if id == "" {
			http.Error(w, "missing query parameter proxyID (a node id from /debug/syncz)", http.StatusBadRequest)
			return
		}
		con := s.findConnection(id)
		if con == nil {
			http.Error(w, fmt.Sprintf("no connected proxy %q (see /debug/connections)", id), http.StatusNotFound)
			return
		}
		dump := configDump{ProxyID: con.proxy.ID, ConnectionID: con.id, Configs: []typeDump{}}
		for _, wr := range con.Watched() {
			var names []string
			if !wr.Wildcard {
				names = wr.ResourceNames
			}
			if con.IsDelta() && !wr.Wildcard && len(names) == 0 {
				dump.Configs = append(dump.Configs, typeDump{TypeURL: wr.TypeURL, VersionSent: wr.VersionSent, VersionAcked: wr.VersionAcked, Resources: []json.RawMessage{}})
				continue
			}
			res, err := s.opts.Generator.Generate(con.proxy, wr.TypeURL, names, &proxypush.PushRequest{Full: true, Reason: []proxypush.TriggerReason{proxypush.ProxyRequest}})
			td := typeDump{TypeURL: wr.TypeURL, VersionSent: wr.VersionSent, VersionAcked: wr.VersionAcked, Resources: []json.RawMessage{}}
			if err != nil {
				td.Error = err.Error()
			}
			for _, res := range res {
				b, err := protojson.Marshal(redactSecret(res.GetResource()))
				if err != nil {
					td.Error = err.Error()
					continue
				}
				td.Resources = append(td.Resources, b)
			}
			dump.Configs = append(dump.Configs, td)
		}
		writeJSON(w, dump)
	})
}

// redactSecret returns a, or for a secret a copy whose private key is
// "[redacted]", as Envoy's admin config_dump shows it: the dump is for
// debugging, not a way to read a Gateway's keys.
func redactSecret(a *anypb.Any) proto.Message {
	if a.GetTypeUrl() != xdsapi.SecretType {
		return a
	}
	var sec tlsv3.Secret
	if err := a.UnmarshalTo(&sec); err != nil {
		return a
	}
	if tc := sec.GetTlsCertificate(); tc.GetPrivateKey() != nil {
		tc.PrivateKey = &core.DataSource{Specifier: &core.DataSource_InlineString{InlineString: "[redacted]"}}
	}
	out, err := anypb.New(&sec)
	if err != nil {
		return &anypb.Any{TypeUrl: xdsapi.SecretType}
	}
	return out
}

type configDump struct {
	ProxyID      string     `json:"proxy_id"`
	ConnectionID string     `json:"connection_id"`
	Configs      []typeDump `json:"configs"`
}

type typeDump struct {
	TypeURL      string            `json:"type_url"`
	VersionSent  string            `json:"version_sent"`
	VersionAcked string            `json:"version_acked"`
	Error        string            `json:"error,omitempty"`
	Resources    []json.RawMessage `json:"resources"`
}

// findConnection returns the connection with connection id id, else the
// newest connection of the proxy whose node id is id. The agent's own
// name-table stream (NDS only, same node id) is returned only when the
// proxy has no other connection.
func (s *Server) findConnection(id string) *Connection {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if c, ok := s.clients[id]; ok {
		return c
	}
	var found *Connection
	foundNDS := false
	for _, c := range s.clients {
		if c.proxy.ID != id {
			continue
		}
		nds := c.ndsOnly()
		if found == nil || (foundNDS && !nds) || (foundNDS == nds && c.connectedAt.After(found.connectedAt)) {
			found, foundNDS = c, nds
		}
	}
	return found
}

// ndsOnly reports whether the connection subscribes to the name table
// and nothing else: the agent's DNS proxy stream.
func (c *Connection) ndsOnly() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.watched[nds.TypeURL]
	return ok && len(c.watched) == 1
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away; nothing to do
}
