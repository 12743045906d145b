package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// defaultStateDir is where `local up` says that a mesh runs and where
// `local exec` and `local status` find it.
const defaultStateDir = "/run/strait/local"

// errNoMesh is the answer when no `local up` runs.
var errNoMesh = errors.New("no local mesh is running; start one with straitctl local up --config-dir DIR")

// localState is what a running `local up` writes for the other local
// commands: state.json in the state directory.
type localState struct {
	PID       int    `json:"pid"`
	ConfigDir string `json:"configDir"`
	BinDir    string `json:"binDir"`
	// WorkDir holds the logs (WorkDir/logs/POD-agent.log, POD-app.log, straitd.log).
	WorkDir        string `json:"workDir"`
	MonitoringAddr string `json:"monitoringAddr"`
	// Bridge is the pods' bridge interface.
	Bridge string     `json:"bridge"`
	Pods   []statePod `json:"pods"`
}

// statePod is one pod of the running mesh.
type statePod struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	IP        string            `json:"ip"`
	Netns     string            `json:"netns"` // the namespace's path, for nsenter --net=
	Labels    map[string]string `json:"labels,omitempty"`
	Ports     []int             `json:"ports,omitempty"`
	App       []string          `json:"app,omitempty"`
	// AppUID is the user (and group) the pod's app runs as, which exec
	// runs commands as too (0: the app runs as root).
	AppUID int `json:"appUID"`
	// ProxyUID is the user (and group) of the pod's agent and proxy.
	ProxyUID int `json:"proxyUID"`
	// Gateway: the pod runs a gateway (strait-agent proxy router, no
	// capture).
	Gateway bool `json:"gateway,omitempty"`
	// OutsideMesh: the pod is a host outside the mesh (no sidecar).
	OutsideMesh bool `json:"outsideMesh,omitempty"`
}

// stateLock is the lock a running `local up` holds on STATE_DIR/lock for
// its whole life; the kernel drops it when the process dies, however it
// dies, so a held lock means a mesh runs.
type stateLock struct {
	dir string
	f   *os.File
}

// lockState takes the state directory's lock, or says which mesh holds it.
func lockState(dir string) (*stateLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			msg := "a local mesh is already running"
			if st, err := readStateFile(dir); err == nil {
				msg += fmt.Sprintf(" (pid %d, config %s)", st.PID, st.ConfigDir)
				return nil, fmt.Errorf("%s: stop it first (Ctrl-C in its terminal, or kill -TERM %d); one local mesh runs at a time per --state-dir", msg, st.PID)
			}
			return nil, fmt.Errorf("%s (it is still starting): stop it first; one local mesh runs at a time per --state-dir", msg)
		}
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	// A state file left by a mesh that died without cleaning up is stale.
	_ = os.Remove(filepath.Join(dir, "state.json"))
	return &stateLock{dir: dir, f: f}, nil
}

// write saves the state atomically.
func (l *stateLock) write(st *localState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(l.dir, ".state.json.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(l.dir, "state.json"))
}

// release removes the state file and the lock.
func (l *stateLock) release() error {
	errs := []error{os.Remove(filepath.Join(l.dir, "state.json"))}
	if errors.Is(errs[0], os.ErrNotExist) {
		errs[0] = nil
	}
	errs = append(errs, os.Remove(l.f.Name()), l.f.Close())
	return errors.Join(errs...)
}

// readState returns the running mesh's state, or errNoMesh when none runs
// (no state file, or one whose `local up` is gone).
func readState(dir string) (*localState, error) {
	st, err := readStateFile(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoMesh
	}
	if err != nil {
		return nil, err
	}
	if !lockHeld(dir) {
		return nil, fmt.Errorf("%w (the state file %s is stale: pid %d no longer holds the mesh)", errNoMesh, filepath.Join(dir, "state.json"), st.PID)
	}
	return st, nil
}

func readStateFile(dir string) (*localState, error) {
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, err
	}
	var st localState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("state file %s: %w (remove it if no local up runs)", filepath.Join(dir, "state.json"), err)
	}
	return &st, nil
}

// lockHeld reports whether another process holds the state lock.
func lockHeld(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "lock"))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// findPod returns the named pod; namespace "" matches any.
func (st *localState) findPod(name, namespace string) (*statePod, error) {
	var found []*statePod
	for i := range st.Pods {
		p := &st.Pods[i]
		if p.Name == name && (namespace == "" || p.Namespace == namespace) {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		var names []string
		for _, p := range st.Pods {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		if namespace != "" {
			return nil, fmt.Errorf("no pod %s in namespace %s; the local mesh has %v", name, namespace, names)
		}
		return nil, fmt.Errorf("no pod %s; the local mesh has %v", name, names)
	}
	return nil, fmt.Errorf("pod %s is in several namespaces: name one with -n", name)
}
