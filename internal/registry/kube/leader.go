package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderOptions configure RunAsLeader.
type LeaderOptions struct {
	// Config is the API server's client config; required.
	Config *rest.Config
	// Namespace and Name name the coordination.k8s.io Lease; required.
	Namespace, Name string
	// Identity is this replica's name in the Lease; default the hostname
	// plus the process id.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod default to client-go's
	// usual 15s, 10s and 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// RunAsLeader runs lead while this replica holds the Lease, for work that
// writes to the API (webhook CA bundles, status) and must be done by one
// replica of several. lead's context is cancelled when the lease is lost;
// RunAsLeader then campaigns again. It returns when ctx is done.
func RunAsLeader(ctx context.Context, opts LeaderOptions, lead func(ctx context.Context)) error {
	if opts.Config == nil || opts.Namespace == "" || opts.Name == "" {
		return errors.New("leader election: Config, Namespace and Name are required")
	}
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = 15 * time.Second
	}
	if opts.RenewDeadline == 0 {
		opts.RenewDeadline = 10 * time.Second
	}
	if opts.RetryPeriod == 0 {
		opts.RetryPeriod = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	log := opts.Logger.With("component", "leader", "lease", opts.Namespace+"/"+opts.Name, "identity", opts.Identity)
	client, err := coordinationv1client.NewForConfig(opts.Config)
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: opts.Namespace, Name: opts.Name},
		Client:     client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: opts.Identity},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   opts.LeaseDuration,
			RenewDeadline:   opts.RenewDeadline,
			RetryPeriod:     opts.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            opts.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					log.Info("became leader")
					lead(ctx)
				},
				OnStoppedLeading: func() { log.Info("stopped leading") },
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		le.Run(ctx) // returns when leadership is lost or ctx is done
	}
	return nil
}
