package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestEverySettingIsDocumented: the variables readConfig reads and the
// doc table are the same set, so `queen config` cannot drift from the code.
func TestEverySettingIsDocumented(t *testing.T) {
	read := map[string]bool{}
	settings, _ := readSettings(lookup(nil))
	for _, r := range settings {
		read[r.Name] = true
		if d, ok := settingDocs[r.Name]; !ok || strings.TrimSpace(d.doc) == "" {
			t.Errorf("%s is read by the config but has no line in settingDocs", r.Name)
		}
	}
	for name := range settingDocs {
		if !read[name] {
			t.Errorf("settingDocs documents %s, which the config does not read", name)
		}
	}
	if len(read) < 50 {
		t.Fatalf("only %d variables recorded: the env helper does not record its reads", len(read))
	}
}

// TestSettingsRecordTheCodesDefaults: defaults come from the reading code.
func TestSettingsRecordTheCodesDefaults(t *testing.T) {
	want := map[string]string{"PORT": "6632", "QUEEN_RAFT_DIR": "./queen-data", "QUEEN_KAFKA_ADDR": "0.0.0.0:9092",
		"QUEEN_LOG_JSON": "false", "JWT_ALGORITHM": "HS256", "QUEEN_RAFT_GROUPS": strconv.Itoa(defaultGroups(1)),
		"QUEEN_KAFKA_SASL_USERS": "", "JWT_SKIP_PATHS": "/health,/metrics/prometheus,/metrics,/"}
	got := map[string]string{}
	settings, _ := readSettings(lookup(nil))
	for _, r := range settings {
		got[r.Name] = r.Default
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s default %q, want %q", k, got[k], v)
		}
	}
}

// TestConfigMasksSecrets: a secret's value shows as <set>, never any of
// its characters or its length.
func TestConfigMasksSecrets(t *testing.T) {
	secrets := map[string]string{
		"JWT_SECRET": "hmac-s3cret-value", "QUEEN_RAFT_TOKEN": "raft-t0ken-value", "QUEEN_RAFT_TOKEN_ACCEPT": "old-t0ken-value",
		"QUEEN_ENCRYPTION_KEY": strings.Repeat("ab", 32), "QUEEN_PPROF_TOKEN": "pprof-t0ken-value",
		"QUEEN_KAFKA_SASL_USERS": "alice:pa55word-value", "JWT_PUBLIC_KEY": "-----BEGIN PUBLIC KEY-----\\nMIIB\\n-----END PUBLIC KEY-----",
		"QUEEN_PROXY_JWT_SECRET": "hs-k3y-for-sign1ng", "QUEEN_PROXY_CP_TOKEN": "cp-t0ken-value",
		"QUEEN_PROXY_BOOTSTRAP_API_KEY": "qk_live_" + strings.Repeat("Zq9", 14) + "x", "QUEEN_PROXY_BOOTSTRAP_PASSWORD": "hunter22-value",
		"GOOGLE_CLIENT_SECRET": "g00gle-s3cret-value", "GITHUB_CLIENT_SECRET": "g1thub-s3cret-value",
		"QUEEN_LINK_TOKEN": "l1nk-t0ken-value",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
		if !settingDocs[k].secret {
			t.Errorf("%s is not marked secret", k)
		}
	}
	for _, format := range [][]string{{"config"}, {"config", "--json"}} {
		var out, errOut bytes.Buffer
		execute(format, &out, &errOut)
		text := out.String() + errOut.String()
		for k, v := range secrets {
			for _, part := range []string{v, v[:6], v[len(v)-6:]} {
				if strings.Contains(text, part) {
					t.Errorf("%v shows part of %s: %q", format, k, part)
				}
			}
		}
		if !strings.Contains(out.String(), "<set>") {
			t.Errorf("%v: no <set> in\n%s", format, out.String())
		}
	}
	settings, _ := describeSettings(lookup(secrets))
	for _, s := range settings {
		if s.Secret && s.Value != "<set>" {
			t.Errorf("%s shows %q", s.Name, s.Value)
		}
	}
}

func TestVersionNeedsNothing(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := execute([]string{"version", "--json"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var v versionInfo
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Version != version || v.Go != runtime.Version() || v.Commit == "" {
		t.Fatalf("%v %+v", err, v)
	}
}

// TestExitCodes: usage errors exit 1, a refused request 2 with the
// server's message and code on stderr, a server error or no server 3.
func TestExitCodes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/missing"):
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"Queue not found","code":"queue_not_found"}`))
		case r.URL.Path == "/api/v1/push":
			if r.Header.Get("Authorization") != "Bearer tok" {
				w.WriteHeader(http.StatusUnauthorized)
				w.Write([]byte(`{"error":"Authentication required","code":"unauthorized"}`))
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"no leader","code":"no_leader"}`))
		default:
			w.WriteHeader(http.StatusOK)
			w.Write([]byte(`{"queues":[]}`))
		}
	}))
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()

	for _, tc := range []struct {
		args   []string
		token  string
		code   int
		stderr string
	}{
		{[]string{"no-such-command"}, "", exitUsage, "unknown command"},
		{[]string{"queues", "describe"}, "", exitUsage, "accepts 1 arg"},
		{[]string{"queues", "list", "--url", "ftp://x"}, "", exitUsage, "not an http"},
		{[]string{"queues", "list", "--url", srv.URL}, "", exitOK, ""},
		{[]string{"queues", "describe", "missing", "--url", srv.URL}, "", exitRefused, "Queue not found (404 queue_not_found)"},
		{[]string{"push", "q", "1", "--url", srv.URL}, "", exitRefused, "Authentication required (401 unauthorized)"},
		{[]string{"push", "q", "1", "--url", srv.URL}, "tok", exitServer, "no leader (503 no_leader)"},
		{[]string{"queues", "list", "--url", dead}, "", exitServer, "cannot reach"},
	} {
		t.Setenv("QUEEN_TOKEN", tc.token)
		var out, errOut bytes.Buffer
		code := execute(tc.args, &out, &errOut)
		if code != tc.code || !strings.Contains(errOut.String(), tc.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut.String(), tc.code, tc.stderr)
		}
	}
}

func TestJSONOrString(t *testing.T) {
	for in, want := range map[string]string{`42`: `42`, `{"a":1}`: `{"a":1}`, `"x"`: `"x"`, `hello`: `"hello"`, `a "b"`: `"a \"b\""`} {
		if got := string(jsonOrString(in)); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	if got := keyPath("user/1 a"); got != "user/1%20a" {
		t.Errorf("keyPath %s", got)
	}
	if !slices.Equal(strings.Split(keyPath("a/b/c"), "/"), []string{"a", "b", "c"}) {
		t.Error("keyPath lost a slash")
	}
}

// TestConfigSaysWhenABootWouldRefuse: the settings are listed, then the
// reason a node would not start, with exit 2.
func TestConfigSaysWhenABootWouldRefuse(t *testing.T) {
	t.Setenv("PORT", "http")
	var out, errOut bytes.Buffer
	code := execute([]string{"config", "--changed"}, &out, &errOut)
	if code != exitRefused || !strings.Contains(out.String(), "PORT") || !strings.Contains(errOut.String(), "PORT: must be a whole number") {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
}

// The listings the server pages are read to their end: the table shows
// every page's rows, --json prints each page as its own document.
func TestListingsFollowEveryPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Query().Get("cursor") {
		case "":
			w.Header().Set(nextCursorHeader, "c1")
			w.Write([]byte(`{"queues":[{"name":"alpha","partitions":1}],"nextCursor":"c1"}`))
		case "c1":
			w.Write([]byte(`{"queues":[{"name":"beta","partitions":2}],"nextCursor":null}`))
		default:
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	t.Setenv("QUEEN_TOKEN", "")
	var out, errOut bytes.Buffer
	if code := execute([]string{"queues", "list", "--url", srv.URL}, &out, &errOut); code != exitOK ||
		!strings.Contains(out.String(), "alpha") || !strings.Contains(out.String(), "beta") {
		t.Fatalf("table: exit %d %q %q", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := execute([]string{"queues", "list", "--json", "--url", srv.URL}, &out, &errOut); code != exitOK ||
		strings.Count(out.String(), "\n") != 2 || !strings.Contains(out.String(), `"beta"`) {
		t.Fatalf("--json: exit %d %q", code, out.String())
	}
}

// TestConfigDefaultsFollowTheEnvironment: a default the code takes from
// another setting is the one this environment gives it (without the
// tenancy header no grant is required), and a variable read only in some
// modes is still listed.
func TestConfigDefaultsFollowTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "false"},
		{map[string]string{"QUEEN_TENANCY_HEADER": "true", "QUEEN_KV_TRUSTED_PROXY": "1"}, "true"},
	} {
		settings, _ := describeSettings(lookup(c.env))
		got := map[string]setting{}
		for _, s := range settings {
			got[s.Name] = s
		}
		if s := got["QUEEN_EPHEMERAL_REQUIRE_GRANT"]; s.Default != c.want || s.Value != c.want {
			t.Errorf("%v: QUEEN_EPHEMERAL_REQUIRE_GRANT default %q value %q, want %q", c.env, s.Default, s.Value, c.want)
		}
		for _, name := range []string{"QUEEN_KAFKA_SASL_USERS", "QUEEN_KV_TRUSTED_PROXY"} {
			if _, ok := got[name]; !ok {
				t.Errorf("%v: %s is not listed", c.env, name)
			}
		}
	}
}

// TestConfigMasksTheJWKSURLsCredentials: `queen config` shows JWT_JWKS_URL
// as the boot log does, without its user:password or query.
func TestConfigMasksTheJWKSURLsCredentials(t *testing.T) {
	raw := "https://jwks-user:jwks-pa55word@idp.example.com/keys.json?token=jwks-qu3ry-secret"
	t.Setenv("JWT_JWKS_URL", raw)
	for _, format := range [][]string{{"config"}, {"config", "--json"}} {
		var out, errOut bytes.Buffer
		execute(format, &out, &errOut)
		text := out.String() + errOut.String()
		for _, part := range []string{"jwks-user", "jwks-pa55word", "jwks-qu3ry-secret"} {
			if strings.Contains(text, part) {
				t.Errorf("%v shows %q of JWT_JWKS_URL", format, part)
			}
		}
		if !strings.Contains(text, "https://***@idp.example.com/keys.json?***") {
			t.Errorf("%v does not show the masked URL:\n%s", format, text)
		}
	}
}
