package xdsclient

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/straitmesh/strait/internal/xdsapi"
)

// fakeSecrets is a SecretSubscriptions whose names the test sets.
type fakeSecrets struct {
	mu      sync.Mutex
	names   []string
	changed chan struct{}
	applied []string // "VERSION NAME"
	reject  string   // a version to reject
}

func newFakeSecrets() *fakeSecrets { return &fakeSecrets{changed: make(chan struct{})} }

func (f *fakeSecrets) ADSSecrets() ([]string, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.names), f.changed
}

func (f *fakeSecrets) ApplySecrets(version string, secrets []*tlsv3.Secret) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if version == f.reject {
		return errors.New("rejects version " + version)
	}
	for _, s := range secrets {
		f.applied = append(f.applied, version+" "+s.GetName())
	}
	return nil
}

func (f *fakeSecrets) set(names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names = names
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeSecrets) appliedSoFar() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.applied)
}

// TestSecretsOnTheADSStream: the secrets that TLS contexts take from ADS
// are subscribed to by name on the one ADS stream as the names appear
// (none before), their responses applied and ACKed or NACKed, and
// subscribed to again on a new stream.
func TestSecretsOnTheADSStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		secrets := newFakeSecrets()
		env := startClient(t, &fakeHandler{}, time.Second, time.Minute, func(o *Options) { o.Secrets = secrets })
		st := env.nextStream(t)
		want(t, st.recv(t), xdsapi.ClusterType, nil, "", "", false)
		want(t, st.recv(t), xdsapi.ListenerType, nil, "", "", false)
		st.noRequest(t) // no secret named yet: no SDS request (an empty list would be a wildcard)

		secrets.set("kubernetes://cred", "kubernetes://cred-cacert")
		names := []string{"kubernetes://cred", "kubernetes://cred-cacert"}
		want(t, st.recv(t), xdsapi.SecretType, names, "", "", false)
		n := st.respond(t, xdsapi.SecretType, "1", &tlsv3.Secret{Name: "kubernetes://cred"}, &tlsv3.Secret{Name: "kubernetes://cred-cacert"})
		want(t, st.recv(t), xdsapi.SecretType, names, "1", n, false)
		if got, w := secrets.appliedSoFar(), []string{"1 kubernetes://cred", "1 kubernetes://cred-cacert"}; !slices.Equal(got, w) {
			t.Errorf("applied %q, want %q", got, w)
		}

		secrets.mu.Lock()
		secrets.reject = "2"
		secrets.mu.Unlock()
		n = st.respond(t, xdsapi.SecretType, "2", &tlsv3.Secret{Name: "kubernetes://cred"})
		want(t, st.recv(t), xdsapi.SecretType, names, "1", n, true)
		if got := counter(env.stats, "sds.update_rejected"); got != 1 {
			t.Errorf("sds.update_rejected = %d, want 1", got)
		}

		// The same names again: no new request.
		secrets.set(names...)
		st.noRequest(t)

		st.end <- errors.New("gone")
		st = env.nextStream(t)
		want(t, st.recv(t), xdsapi.ClusterType, nil, "", "", false)
		want(t, st.recv(t), xdsapi.ListenerType, nil, "", "", false)
		want(t, st.recv(t), xdsapi.SecretType, names, "1", "", false)
	})
}
