package forward

import (
	"errors"
	"strings"

	"github.com/straitmesh/strait/internal/proxy/cluster"
)

// Failure is a local reply for an exchange that got no response head.
type Failure struct {
	Code  int // 0: the client went away; answer nothing
	Flags string
	Body  string
}

// Envoy's local reply bodies.
const (
	// BodyOverflow is the body when a circuit breaker is open.
	BodyOverflow = "upstream connect error or disconnect/reset before headers. reset reason: overflow"
	// BodyNoHealthy is the body when a cluster has no endpoint to pick.
	BodyNoHealthy = "no healthy upstream"
)

// Envoy's local replies (router and connection manager).
var (
	FailConnect        = Failure{503, "UF", "upstream connect error or disconnect/reset before headers. reset reason: connection failure"}
	FailTerminated     = Failure{503, "UC", "upstream connect error or disconnect/reset before headers. reset reason: connection termination"}
	FailProtocol       = Failure{502, "UPE", "upstream connect error or disconnect/reset before headers. reset reason: protocol error"}
	FailRouteTimeout   = Failure{504, "UT", "upstream request timeout"}
	FailStreamIdle     = Failure{408, "SI", "stream timeout"}
	FailRequestTimeout = Failure{408, "", "request timeout"}
	FailBadRequest     = Failure{400, "DPE", "Bad Request"}
	FailClientGone     = Failure{0, "DC", ""}
)

// PickFailure is the local reply for a failed PickRequest: 503 UO with
// x-envoy-overloaded when a circuit breaker is open (the codecs' local
// replies add the header for UO), else 503 UH.
func PickFailure(err error) Failure {
	if errors.Is(err, cluster.ErrOverflow) {
		return Failure{503, "UO", BodyOverflow}
	}
	return Failure{503, "UH", BodyNoHealthy}
}

// ConnectFailure is the local reply when no upstream connection could be
// had: 503 UO when the connection circuit breakers overflowed, else UF.
func ConnectFailure(err error) Failure {
	if errors.Is(err, cluster.ErrOverflow) {
		return Failure{503, "UO", BodyOverflow}
	}
	return FailConnect
}

// LocalFailureOf maps a local reply for an exchange without a response to
// the outlier detector's locally originated result (0: not the upstream's
// doing, e.g. the client left).
func LocalFailureOf(f Failure) cluster.LocalFailure {
	flag, _, _ := strings.Cut(f.Flags, ",") // "UF,URX": the first is the failure
	switch flag {
	case "UF":
		return cluster.LocalConnectFailed
	case "UT":
		return cluster.LocalTimeout
	case "UC", "UPE":
		return cluster.LocalReset
	}
	return 0
}

// ReportRetriedFailure feeds an attempt that failed locally and is about
// to be retried to outlier detection: Envoy's router reports every
// attempt's result (Filter::onUpstreamReset → updateOutlierDetection), so
// a host that refuses connections is ejected even when the retries of its
// requests succeed elsewhere. The last attempt's failure is reported where
// it is answered.
func ReportRetriedFailure(cl *cluster.Cluster, ep cluster.Endpoint, f Failure) {
	if lf := LocalFailureOf(f); lf != 0 {
		cl.ReportLocalFailure(ep, lf)
	}
}
