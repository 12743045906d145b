package gen

// Builds returns how many resources of each kind ("cluster", "eds",
// "listener", "route") the generator has built, not counting the proxy's
// own inbound ones; tests read it to see the cache at work.
func (g *Generator) Builds() map[string]int { return g.cache.Builds() }
