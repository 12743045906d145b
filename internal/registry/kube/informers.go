package kube

import (
	"sync"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// informerSet is the registry's own small set of shared informers, one per
// built-in resource it watches, each listing and watching through the REST
// client of that resource's API group. client-go's SharedInformerFactory
// would do the same, but its interface reaches every API group, which
// links every group's clients, informers and listers into straitd: about
// a third of the binary, and of its resident memory.
type informerSet struct {
	mu        sync.Mutex
	informers []cache.SharedIndexInformer
	started   int // informers[:started] are running
	wg        sync.WaitGroup
}

// add returns a new informer for resource (e.g. "services") of the group
// that client speaks for, caching objects like example after dropping
// their managed fields.
func (s *informerSet) add(client cache.Getter, resource string, example runtime.Object) cache.SharedIndexInformer {
	return s.addSelected(client, resource, example, fields.Everything())
}

// addSelected is add for the objects that selector (a field selector)
// keeps.
func (s *informerSet) addSelected(client cache.Getter, resource string, example runtime.Object, selector fields.Selector) cache.SharedIndexInformer {
	lw := cache.NewListWatchFromClient(client, resource, "", selector)
	inf := cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = inf.SetTransform(stripManagedFields) // fails only once running
	s.mu.Lock()
	s.informers = append(s.informers, inf)
	s.mu.Unlock()
	return inf
}

// Start runs the informers not yet running until stop is closed.
func (s *informerSet) Start(stop <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, inf := range s.informers[s.started:] {
		s.wg.Go(func() { inf.Run(stop) })
	}
	s.started = len(s.informers)
}

// Shutdown waits for the informers to stop; call it after closing the
// channel given to Start.
func (s *informerSet) Shutdown() { s.wg.Wait() }
