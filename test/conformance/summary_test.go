package conformance

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// profileDefs are the profiles parseProfiles accepts.
var profileDefs = map[suite.ConformanceProfileName]suite.ConformanceProfile{
	suite.GatewayHTTPConformanceProfileName: suite.GatewayHTTPConformanceProfile,
	suite.GatewayGRPCConformanceProfileName: suite.GatewayGRPCConformanceProfile,
	suite.GatewayTLSConformanceProfileName:  suite.GatewayTLSConformanceProfile,
	suite.GatewayTCPConformanceProfileName:  suite.GatewayTCPConformanceProfile,
	suite.MeshHTTPConformanceProfileName:    suite.MeshHTTPConformanceProfile,
	suite.MeshGRPCConformanceProfileName:    suite.MeshGRPCConformanceProfile,
}

// summarize renders the run for a reader: each profile's core and extended
// result with its counts, the features claimed and not, and every test of
// the profiles passed, failed or skipped, each skip with its reason.
// results are the outcomes the suite's hook saw, by short name.
func summarize(report *confv1.ConformanceReport, all []suite.ConformanceTest, opts suite.ConformanceOptions, results map[string]string) string {
	var b strings.Builder
	for _, p := range report.ProfileReports {
		fmt.Fprintf(&b, "profile %s: %s\n", p.Name, p.Summary)
		fmt.Fprintf(&b, "  core: %s (%d passed, %d failed, %d skipped)\n", p.Core.Result, p.Core.Passed, p.Core.Failed, p.Core.Skipped)
		if p.Extended != nil {
			fmt.Fprintf(&b, "  extended: %s (%d passed, %d failed, %d skipped)\n", p.Extended.Result, p.Extended.Passed, p.Extended.Failed, p.Extended.Skipped)
			if len(p.Extended.UnsupportedFeatures) > 0 {
				fmt.Fprintf(&b, "  extended features not claimed: %s\n", strings.Join(p.Extended.UnsupportedFeatures, ", "))
			}
		}
	}
	claimedSet := sets.New(opts.SupportedFeatures...)
	relevant := sets.New[features.FeatureName]()
	for _, name := range opts.ConformanceProfiles {
		p := profileDefs[name]
		relevant = relevant.Union(p.CoreFeatures).Union(p.ExtendedFeatures)
		claimedSet = claimedSet.Union(p.CoreFeatures)
	}
	fmt.Fprintf(&b, "supported features: %s\n", joinFeatures(sets.List(claimedSet)))

	byResult := map[string][]string{}
	outside := map[string][]string{}
	var skipped []string
	for _, test := range all {
		if !relevant.HasAll(test.Features...) {
			// A test of another profile, unless the suite ran it (every
			// feature it needs is claimed): the profiles' reports leave
			// it out, the summary does not.
			if res := results[test.ShortName]; res == "passed" || res == "failed" {
				outside[res] = append(outside[res], test.ShortName)
			}
			continue
		}
		res, ran := results[test.ShortName]
		if !ran {
			res = "skipped"
		}
		if res != "skipped" {
			byResult[res] = append(byResult[res], test.ShortName)
			continue
		}
		skipped = append(skipped, fmt.Sprintf("  %s: %s", test.ShortName, skipReason(test, opts, claimedSet)))
	}
	for _, res := range []string{"passed", "failed"} {
		names := byResult[res]
		sort.Strings(names)
		fmt.Fprintf(&b, "%s (%d): %s\n", res, len(names), strings.Join(names, ", "))
	}
	for _, res := range []string{"passed", "failed"} {
		if names := outside[res]; len(names) > 0 {
			sort.Strings(names)
			fmt.Fprintf(&b, "%s outside the profiles' reports (%d): %s\n", res, len(names), strings.Join(names, ", "))
		}
	}
	sort.Strings(skipped)
	fmt.Fprintf(&b, "skipped (%d):\n", len(skipped))
	for _, s := range skipped {
		b.WriteString(s + "\n")
	}
	return b.String()
}

// skipReason says why test did not run.
func skipReason(test suite.ConformanceTest, opts suite.ConformanceOptions, claimedSet sets.Set[features.FeatureName]) string {
	if opts.RunTest != "" && opts.RunTest != test.ShortName {
		return fmt.Sprintf("not selected (%s=%s)", envRunTest, opts.RunTest)
	}
	if slices.Contains(opts.SkipTests, test.ShortName) {
		if why, ok := skippedTests[test.ShortName]; ok {
			return why
		}
		return "skipped by " + envSkip
	}
	var missing []string
	for _, f := range test.Features {
		if claimedSet.Has(f) {
			continue
		}
		why := unclaimed[f]
		if why == "" {
			why = "not claimed"
		}
		missing = append(missing, fmt.Sprintf("needs %s (%s)", f, why))
	}
	if len(missing) > 0 {
		return strings.Join(missing, "; ")
	}
	return "skipped by the test itself (see its log)"
}

func joinFeatures(fs []features.FeatureName) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// TestSummarize: the profile lines come from the report; a test that
// passed or failed is listed as such; a skipped one carries its reason:
// the harness's list, the missing feature and why it is not claimed, or
// the test the run was narrowed to; tests of other profiles are left out
// unless they ran.
func TestSummarize(t *testing.T) {
	report := &confv1.ConformanceReport{ProfileReports: []confv1.ProfileReport{{
		Name: "GATEWAY-HTTP", Summary: "Core tests failed with 1 test failures.",
		Core: confv1.Status{Result: confv1.Failure, Statistics: confv1.Statistics{Passed: 1, Failed: 1, Skipped: 1}},
	}}}
	all := []suite.ConformanceTest{
		{ShortName: "Passes", Features: []features.FeatureName{features.SupportGateway, features.SupportHTTPRoute}},
		{ShortName: "Fails", Features: []features.FeatureName{features.SupportGateway, features.SupportHTTPRoute}},
		{ShortName: "HarnessSkips", Features: []features.FeatureName{features.SupportGateway}},
		{ShortName: "NeedsCORS", Features: []features.FeatureName{features.SupportHTTPRoute, features.SupportHTTPRouteCORS}},
		{ShortName: "TLSRouteOnly", Features: []features.FeatureName{features.SupportTLSRoute}},
		{ShortName: "RanOutside", Features: []features.FeatureName{features.SupportMesh, features.SupportHTTPRoute}},
	}
	skippedTests["HarnessSkips"] = "a reason of the harness"
	defer delete(skippedTests, "HarnessSkips")
	profiles, err := parseProfiles("GATEWAY-HTTP")
	if err != nil {
		t.Fatal(err)
	}
	opts := suite.ConformanceOptions{ConfigurableOptions: suite.ConfigurableOptions{
		ConformanceProfiles: profiles, SupportedFeatures: supportedFeatures(false), SkipTests: []string{"HarnessSkips"}}}
	got := summarize(report, all, opts, map[string]string{"Passes": "passed", "Fails": "failed", "HarnessSkips": "skipped", "NeedsCORS": "skipped", "RanOutside": "failed"})
	for _, want := range []string{
		"profile GATEWAY-HTTP: Core tests failed with 1 test failures.\n",
		"  core: failure (1 passed, 1 failed, 1 skipped)\n",
		"passed (1): Passes\n",
		"failed (1): Fails\n",
		"  HarnessSkips: a reason of the harness\n",
		"  NeedsCORS: needs HTTPRouteCORS (" + unclaimed[features.SupportHTTPRouteCORS] + ")\n",
		"skipped (2):\n",
		"failed outside the profiles' reports (1): RanOutside\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if !strings.Contains(got, "supported features: ") || !strings.Contains(got, "HTTPRouteQueryParamMatching") {
		t.Errorf("summary does not list the claimed features:\n%s", got)
	}
	if strings.Contains(got, "TLSRouteOnly") {
		t.Errorf("a test of another profile is listed:\n%s", got)
	}
	opts.RunTest = "Passes"
	got = summarize(report, all, opts, map[string]string{"Passes": "passed"})
	if want := "  Fails: not selected (" + envRunTest + "=Passes)\n"; !strings.Contains(got, want) {
		t.Errorf("narrowed run: summary lacks %q:\n%s", want, got)
	}
}

// TestParseProfiles: the default, a list, the MESH profiles, and an
// unknown name refused.
func TestParseProfiles(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    []suite.ConformanceProfileName
		wantErr string
	}{
		{"", []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName, suite.GatewayGRPCConformanceProfileName}, ""},
		{"GATEWAY-HTTP", []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName}, ""},
		{"GATEWAY-HTTP, GATEWAY-TLS", []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName, suite.GatewayTLSConformanceProfileName}, ""},
		{"MESH-HTTP", []suite.ConformanceProfileName{suite.MeshHTTPConformanceProfileName}, ""},
		{"GATEWAY-HTTP,MESH-GRPC", []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName, suite.MeshGRPCConformanceProfileName}, ""},
		{"GATEWAY-FOO", nil, "unknown profile"},
	} {
		got, err := parseProfiles(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: %v, want an error with %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %v %v, want %v", c.in, got, err, c.want)
		}
		if mesh := strings.Contains(c.in, "MESH-"); hasMesh(got) != mesh {
			t.Errorf("%q: hasMesh = %v, want %v", c.in, !mesh, mesh)
		}
	}
}
