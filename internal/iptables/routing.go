package iptables

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
)

// convergeRouting makes the policy routing and lo addresses match plan,
// touching only entries with protocol RouteProtocol (and ::6/128 on lo),
// and returns the changing `ip` commands it ran.
func convergeRouting(ctx context.Context, r Router, plan Plan) ([][]string, error) {
	var done [][]string
	run := func(args ...string) error {
		if _, err := r.IP(ctx, args...); err != nil {
			return err
		}
		done = append(done, args)
		return nil
	}
	for _, fam := range []Family{IPv4, IPv6} {
		flag := "-4"
		if fam == IPv6 {
			flag = "-6"
		}
		var want *PolicyRoute
		for i := range plan.Routes {
			if plan.Routes[i].Family == fam {
				want = &plan.Routes[i]
			}
		}
		// `ip rule show protocol N` does not filter (iproute2 6.1): filter
		// here.
		out, err := r.IP(ctx, flag, "rule", "show")
		if err != nil {
			if want == nil {
				continue // e.g. IPv6 disabled: nothing of ours there
			}
			return done, err
		}
		kept := false
		for _, line := range strings.Split(out, "\n") {
			pref, mark, table, ours := parseRule(line)
			if !ours {
				continue
			}
			if want != nil && !kept && sameNumber(mark, want.Mark) && table == want.Table {
				kept = true
				continue
			}
			if err := run(flag, "rule", "del", "pref", pref, "protocol", RouteProtocol); err != nil {
				return done, err
			}
		}
		if want != nil && !kept {
			if err := run(want.RuleArgs()...); err != nil {
				return done, err
			}
		}

		out, err = r.IP(ctx, flag, "route", "show", "table", "all", "proto", RouteProtocol)
		if err != nil {
			return done, err
		}
		routeOK := false
		flushed := map[string]bool{}
		for _, line := range strings.Split(out, "\n") {
			fields := strings.Fields(line)
			table := fieldAfter(fields, "table")
			if table == "" {
				continue
			}
			if flushed[table] {
				// The flush removed this route too, however right it is.
				continue
			}
			if want != nil && table == want.Table && strings.HasPrefix(line, "local default dev lo ") {
				routeOK = true
				continue
			}
			flushed[table] = true
			if err := run(flag, "route", "flush", "table", table, "proto", RouteProtocol); err != nil {
				return done, err
			}
			if want != nil && table == want.Table {
				routeOK = false
			}
		}
		if want != nil && !routeOK {
			if err := run(want.RouteArgs()...); err != nil {
				return done, err
			}
		}
	}

	passthrough6 := netip.MustParsePrefix(inboundPassthrough6)
	want6 := false
	for _, a := range plan.LoopbackAddrs {
		if a == passthrough6 {
			want6 = true
		}
	}
	out, err := r.IP(ctx, "-6", "addr", "show", "dev", "lo")
	if err != nil {
		if want6 {
			return done, err
		}
		return done, nil
	}
	has6 := false
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "inet6" && f[1] == passthrough6.String() {
			has6 = true
		}
	}
	switch {
	case want6 && !has6:
		return done, run(addrArgs("add", passthrough6)...)
	case !want6 && has6:
		return done, run(addrArgs("del", passthrough6)...)
	}
	return done, nil
}

// parseRule reads an `ip rule show` line such as
// "32765:	from all fwmark 0x539 lookup 133 proto 76".
func parseRule(line string) (pref, mark, table string, ours bool) {
	fields := strings.Fields(line)
	if len(fields) == 0 || fieldAfter(fields, "proto") != RouteProtocol {
		return "", "", "", false
	}
	pref = strings.TrimSuffix(fields[0], ":")
	return pref, fieldAfter(fields, "fwmark"), fieldAfter(fields, "lookup"), true
}

func fieldAfter(fields []string, key string) string {
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == key {
			return fields[i+1]
		}
	}
	return ""
}

// sameNumber compares numbers as ip prints them (0x539) and as flags give
// them (1337).
func sameNumber(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 0, 32)
	y, err2 := strconv.ParseUint(b, 0, 32)
	return err1 == nil && err2 == nil && x == y
}
