package cluster

import "time"

// Cluster warming, as Envoy's cluster manager does it
// (source/common/upstream/cluster_manager_impl.cc, with EdsClusterImpl in
// source/extensions/clusters/eds/eds.cc): a cluster CDS adds or changes
// warms, while the version it replaces (if any) keeps serving, until an
// EDS cluster has its ClusterLoadAssignment or a DNS cluster its first
// resolution. An EDS cluster whose assignment does not come within its
// eds_config's initial_fetch_timeout (default 15 s, 0: none) stops
// waiting: EdsClusterImpl::onConfigUpdateFailed finishes its
// initialization with no hosts, so it becomes active with none (503 "no
// healthy upstream") until EDS delivers. The proxy's start-up waits for
// the clusters of the first CDS response to leave warming before it asks
// for listeners (startup.check in package proxy).

// startFetchTimerLocked arms c's initial fetch timeout when c, an EDS
// cluster, starts warming (a warming version CDS repeats keeps its timer).
func (m *Manager) startFetchTimerLocked(name string, c *Cluster) {
	if c.Kind != KindEDS || c.edsFetchTimeout <= 0 || m.fetchTimers[c] != nil {
		return
	}
	m.fetchTimers[c] = time.AfterFunc(c.edsFetchTimeout, func() { m.fetchTimedOut(name, c) })
}

// stopFetchTimersLocked stops the timers of clusters no longer warming.
func (m *Manager) stopFetchTimersLocked() {
	for c, t := range m.fetchTimers {
		if m.warming[c.Name] != c {
			t.Stop()
			delete(m.fetchTimers, c)
		}
	}
}

// fetchTimedOut ends the warming of c, an EDS cluster whose endpoints did
// not come within its initial fetch timeout: it replaces the version it
// was to replace, with no endpoints.
func (m *Manager) fetchTimedOut(name string, c *Cluster) {
	m.mu.Lock()
	if m.warming[name] != c {
		m.mu.Unlock()
		return // its endpoints came, or it was replaced or removed, meanwhile
	}
	m.log.Warn("cluster endpoints not received within the initial fetch timeout; it goes on without endpoints until they come",
		"cluster", name, "eds_service_name", c.EDSName, "initial_fetch_timeout", c.edsFetchTimeout)
	delete(m.warming, name)
	m.stopFetchTimersLocked()
	c.setEndpointList(endpointList{})
	next := m.copyActive()
	if old := next[name]; old != nil {
		m.retire([]*Cluster{old})
	}
	next[name] = c
	m.active.Store(&next)
	c.activate()
	m.stats.Gauge("cluster_manager.warming_clusters").Store(int64(len(m.warming)))
	m.stats.Gauge("cluster_manager.active_clusters").Store(int64(len(next)))
	hook := m.onWarmed
	m.mu.Unlock()
	if hook != nil {
		hook()
	}
}
