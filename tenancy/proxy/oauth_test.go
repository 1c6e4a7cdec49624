package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"golang.org/x/oauth2"
)

// fakeIdP is an identity provider: a token endpoint that takes the code
// "good-code" and a userinfo endpoint answering info for its token.
func fakeIdP(t *testing.T, info string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/token":
			_ = r.ParseForm()
			if r.Form.Get("code") != "good-code" || r.Form.Get("client_secret") != "secret" {
				http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"access_token":"at-1","token_type":"Bearer","expires_in":3600}`))
		case "/userinfo":
			if r.Header.Get("Authorization") != "Bearer at-1" {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte(info))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// oauthCall runs a GET through the proxy with a cookie, returning status,
// Location and Set-Cookie values.
func oauthCall(p *Proxy, uri, cookie string) (int, string, []string, string) {
	var req fasthttp.Request
	req.SetRequestURI(uri)
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	var rc fasthttp.RequestCtx
	rc.Init(&req, nil, nil)
	p.serve(&rc)
	var cookies []string
	rc.Response.Header.VisitAllCookie(func(_, v []byte) { cookies = append(cookies, string(v)) })
	return rc.Response.StatusCode(), string(rc.Response.Header.Peek("Location")), cookies, string(rc.Response.Body())
}

// signIn runs login then callback with code and returns the callback's
// answer.
func signIn(t *testing.T, p *Proxy, provider, code string) (int, []string, string) {
	t.Helper()
	code1, loc, cookies, _ := oauthCall(p, "/auth/"+provider+"/login", "")
	if code1 != http.StatusFound || len(cookies) != 1 {
		t.Fatalf("login: %d %v", code1, cookies)
	}
	u, err := url.Parse(loc)
	if err != nil || u.Query().Get("state") == "" || !strings.Contains(u.Query().Get("redirect_uri"), "/auth/"+provider+"/callback") {
		t.Fatalf("login redirect %q", loc)
	}
	state := u.Query().Get("state")
	cookie := strings.SplitN(cookies[0], ";", 2)[0]
	status, _, set, body := oauthCall(p, "/auth/"+provider+"/callback?code="+code+"&state="+state, cookie)
	return status, set, body
}

func TestOAuthSignInAgainstAFakeProvider(t *testing.T) {
	google := fakeIdP(t, `{"email":"Dinesh@Hooli.example","email_verified":true,"hd":"hooli.example"}`)
	github := fakeIdP(t, `[{"email":"old@x.example","primary":false,"verified":true},{"email":"gilfoyle@hooli.example","primary":true,"verified":true}]`)
	ep := func(s *httptest.Server) oauth2.Endpoint {
		return oauth2.Endpoint{AuthURL: s.URL + "/authorize", TokenURL: s.URL + "/token", AuthStyle: oauth2.AuthStyleInParams}
	}
	p, _ := testProxy(t, Config{JWTSecret: "s", OAuth: OAuthConfig{PublicURL: "https://q.example",
		Google: OAuthProvider{ClientID: "g", ClientSecret: "secret", Endpoint: ep(google), UserInfoURL: google.URL + "/userinfo",
			AllowedDomains: []string{"hooli.example"}},
		GitHub:      OAuthProvider{ClientID: "h", ClientSecret: "secret", Endpoint: ep(github), UserInfoURL: github.URL + "/userinfo"},
		DefaultRole: RoleViewer}})
	ctx := context.Background()
	tn, _, _ := p.store.ensureTenant(ctx, "hooli", "")
	c, _, _ := p.store.ensureCluster(ctx, tn, "hooli", "dev", nil)

	// An identity with no account gets none without autoprovisioning.
	if status, _, body := signIn(t, p, "google", "good-code"); status != http.StatusForbidden {
		t.Fatalf("an unknown identity: %d %s", status, body)
	}
	// A bad code, a forged state.
	if status, _, _ := signIn(t, p, "google", "bad-code"); status != http.StatusUnauthorized {
		t.Fatalf("a bad code: %d", status)
	}
	if status, _, _, _ := oauthCall(p, "/auth/google/callback?code=good-code&state=forged", oauthStateCookie+"=other"); status != http.StatusBadRequest {
		t.Fatalf("a forged state: %d", status)
	}

	p.cfg.OAuth.Autoprovision, p.cfg.OAuth.AutoprovisionTo = true, "hooli"
	status, set, body := signIn(t, p, "google", "good-code")
	if status != http.StatusFound || len(set) != 1 || !strings.HasPrefix(set[0], sessionCookie+"=") {
		t.Fatalf("autoprovisioned sign-in: %d %v %s", status, set, body)
	}
	token := strings.TrimPrefix(strings.SplitN(set[0], ";", 2)[0], sessionCookie+"=")
	s, err := p.session(ctx, token)
	if err != nil || s.user.Email != "dinesh@hooli.example" || s.user.Roles[c.ID] != RoleViewer {
		t.Fatalf("session %+v %v", s, err)
	}
	// GitHub: the primary verified email.
	status, set, _ = signIn(t, p, "github", "good-code")
	if status != http.StatusFound || len(set) != 1 {
		t.Fatalf("github: %d", status)
	}
	token = strings.TrimPrefix(strings.SplitN(set[0], ";", 2)[0], sessionCookie+"=")
	if s, err := p.session(ctx, token); err != nil || s.user.Email != "gilfoyle@hooli.example" {
		t.Fatalf("github session %+v %v", s, err)
	}
	// Another domain is refused for Google.
	p.cfg.OAuth.Google.AllowedDomains = []string{"piedpiper.example"}
	if status, _, _ := signIn(t, p, "google", "good-code"); status != http.StatusUnauthorized {
		t.Fatalf("a domain not allowed: %d", status)
	}
}
