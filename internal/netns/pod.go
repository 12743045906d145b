package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Pod is one network namespace on a Network. Its exported fields are
// read-only; methods are safe for concurrent use.
type Pod struct {
	// Name is the name given to AddPod.
	Name string
	// Netns is the namespace's name; its path is /run/netns/NETNS.
	Netns string
	// IP is the address of the pod's eth0.
	IP netip.Addr
	// HostVeth is the host-side end of the pod's veth pair.
	HostVeth string

	mu    sync.Mutex // guards procs
	procs []*Process
}

// NetnsPath is the namespace's bind mount, for nsenter --net= and setns.
func (p *Pod) NetnsPath() string { return "/run/netns/" + p.Netns }

// AddPod creates a namespace PREFIX-RUNID-NAME with eth0 on the bridge at
// the next free address, lo up, and a route for ServiceCIDR via eth0. name
// must be unique in the network (letters, digits, '-', '_').
func (n *Network) AddPod(ctx context.Context, name string) (*Pod, error) {
	return n.addPod(ctx, name, netip.Addr{})
}

// AddPodAt is AddPod with the pod's address chosen by the caller: ip must
// be in the network's subnet, not its network, host (.1) or broadcast
// address, and not another pod's.
func (n *Network) AddPodAt(ctx context.Context, name string, ip netip.Addr) (*Pod, error) {
	if !ip.IsValid() {
		return nil, fmt.Errorf("testenv: pod %s: no address given", name)
	}
	return n.addPod(ctx, name, ip)
}

func (n *Network) addPod(ctx context.Context, name string, ip netip.Addr) (*Pod, error) {
	if !validName(name) {
		return nil, fmt.Errorf("testenv: pod name %q: use letters, digits, '-' or '_' (at most 32)", name)
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errors.New("testenv: AddPod on a closed network")
	}
	for _, p := range n.pods {
		if p.Name == name {
			n.mu.Unlock()
			return nil, fmt.Errorf("testenv: pod %q exists", name)
		}
	}
	if ip.IsValid() {
		if err := n.checkFixedIP(ip); err != nil {
			n.mu.Unlock()
			return nil, fmt.Errorf("testenv: pod %s: %w", name, err)
		}
	} else {
		// Skip the addresses pods were given explicitly.
		for n.nextHost <= 254 && n.ipTaken(n.hostAddr(n.nextHost)) {
			n.nextHost++
		}
		if n.nextHost > 254 {
			n.mu.Unlock()
			return nil, fmt.Errorf("testenv: network %s is full", n.Subnet)
		}
		ip = n.hostAddr(n.nextHost)
		n.nextHost++
	}
	host := int(ip.As4()[3])
	p := &Pod{
		Name:     name,
		Netns:    n.prefix + "-" + n.RunID + "-" + name,
		IP:       ip,
		HostVeth: "stv" + n.RunID + "-" + strconv.Itoa(host), // at most 13 bytes
	}
	// Registered before anything exists, so Close removes a half-made pod.
	n.pods = append(n.pods, p)
	n.mu.Unlock()

	steps := [][]string{
		{"netns", "add", p.Netns},
		{"link", "add", p.HostVeth, "type", "veth", "peer", "name", "eth0", "netns", p.Netns},
		{"link", "set", p.HostVeth, "master", n.Bridge, "up"},
		{"-n", p.Netns, "link", "set", "lo", "up"},
		{"-n", p.Netns, "addr", "add", netip.PrefixFrom(p.IP, n.Subnet.Bits()).String(), "dev", "eth0"},
		{"-n", p.Netns, "link", "set", "eth0", "up"},
		{"-n", p.Netns, "route", "add", ServiceCIDR.String(), "dev", "eth0"},
	}
	for _, args := range steps {
		if _, err := ipCmd(ctx, args...); err != nil {
			return nil, fmt.Errorf("testenv: add pod %s: %w", name, err)
		}
	}
	return p, nil
}

// hostAddr is the subnet's address with last octet host.
func (n *Network) hostAddr(host int) netip.Addr {
	a := n.Subnet.Addr().As4()
	a[3] = byte(host)
	return netip.AddrFrom4(a)
}

// ipTaken reports whether a pod has ip. n.mu is held.
func (n *Network) ipTaken(ip netip.Addr) bool {
	for _, p := range n.pods {
		if p.IP == ip {
			return true
		}
	}
	return false
}

// checkFixedIP says why ip cannot be a new pod's address. n.mu is held.
func (n *Network) checkFixedIP(ip netip.Addr) error {
	switch {
	case !n.Subnet.Contains(ip):
		return fmt.Errorf("address %s is outside the network's subnet %s", ip, n.Subnet)
	case ip.As4()[3] == 0 || ip.As4()[3] == 255:
		return fmt.Errorf("address %s is the subnet's network or broadcast address", ip)
	case ip == n.HostIP:
		return fmt.Errorf("address %s is the host's address on the bridge", ip)
	case n.ipTaken(ip):
		return fmt.Errorf("address %s is another pod's", ip)
	}
	return nil
}

// ExecOptions says how to run a process in a pod.
type ExecOptions struct {
	// UID and GID to run as. With UID 0 the process stays root; a non-zero
	// GID then still sets its group (root in group 1337, as the proxy runs
	// in TPROXY mode).
	UID, GID int
	// Env is added to the caller's environment.
	Env []string
	// Dir is the working directory; empty means the caller's.
	Dir string
	// Stdout and Stderr receive the output of Start; nil discards it.
	Stdout, Stderr io.Writer
}

// Command returns `nsenter --net=/run/netns/NETNS [--setuid U --setgid G]
// -- NAME ARGS...`, in its own process group, which ctx cancellation kills
// as a whole.
func (p *Pod) Command(ctx context.Context, opts ExecOptions, name string, args ...string) *exec.Cmd {
	nsArgs := []string{"--net=" + p.NetnsPath()}
	switch {
	case opts.UID != 0:
		nsArgs = append(nsArgs, "--setuid", strconv.Itoa(opts.UID), "--setgid", strconv.Itoa(opts.GID))
	case opts.GID != 0:
		// Root with another group: the proxy in TPROXY mode (it needs
		// CAP_NET_ADMIN, and the capture rules recognise it by group).
		nsArgs = append(nsArgs, "--setgid", strconv.Itoa(opts.GID))
	}
	nsArgs = append(nsArgs, "--", name)
	cmd := exec.CommandContext(ctx, "nsenter", append(nsArgs, args...)...)
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.Dir = opts.Dir
	cmd.Stdout = opts.Stdout
	cmd.Stderr = opts.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	// nsenter execs the target, so its pid leads the group.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// Process is a process started with Pod.Start. It is waited for in the
// background; use Wait or Done rather than Cmd.Wait.
type Process struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done is closed
}

// Wait waits for the process to exit and returns Cmd.Wait's error.
func (pr *Process) Wait() error { <-pr.done; return pr.err }

// Done is closed when the process has exited.
func (pr *Process) Done() <-chan struct{} { return pr.done }

// Kill kills the process group and waits for the process to exit.
func (pr *Process) Kill() error {
	if err := killGroup(pr.Cmd); err != nil {
		return err
	}
	<-pr.done
	return nil
}

// Start starts a process in the pod (see Command). The network's Close
// kills it if it is still running.
func (p *Pod) Start(ctx context.Context, opts ExecOptions, name string, args ...string) (*Process, error) {
	cmd := p.Command(ctx, opts, name, args...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("testenv: start %s in pod %s: %w", name, p.Name, err)
	}
	pr := &Process{Cmd: cmd, done: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		close(pr.done)
	}()
	p.mu.Lock()
	p.procs = append(p.procs, pr)
	p.mu.Unlock()
	return pr, nil
}

// Run runs a process in the pod (see Command) and returns its combined
// output; a failure's error includes the output.
func (p *Pod) Run(ctx context.Context, opts ExecOptions, name string, args ...string) ([]byte, error) {
	cmd := p.Command(ctx, opts, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("testenv: %s %s in pod %s: %w: %s",
			name, strings.Join(args, " "), p.Name, err, strings.TrimSpace(out.String()))
	}
	return out.Bytes(), nil
}

// close kills the pod's processes and removes its namespace and veth.
func (p *Pod) close(ctx context.Context) error {
	p.mu.Lock()
	procs := p.procs
	p.procs = nil
	p.mu.Unlock()
	var errs []error
	for _, pr := range procs {
		_ = killGroup(pr.Cmd)
	}
	for _, pr := range procs {
		select {
		case <-pr.done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("testenv: pod %s: pid %d did not exit", p.Name, pr.Cmd.Process.Pid))
		}
	}
	// Anything else still in the namespace (started with Command) would
	// keep it, and the veth, alive.
	if out, err := ipCmd(ctx, "netns", "pids", p.Netns); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	// Deleting the host end removes the pair at once; namespace teardown
	// is asynchronous in the kernel.
	if _, err := ipCmd(ctx, "link", "del", p.HostVeth); err != nil && !isNotFound(err) {
		errs = append(errs, err)
	}
	if _, err := ipCmd(ctx, "netns", "del", p.Netns); err != nil && !isNotFound(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
