package proxy

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/oauth2"
)

// Sign-in with Google and GitHub (spec §6.10), through golang.org/x/oauth2:
// GET /auth/<provider>/login redirects to the provider with a state the
// browser keeps in a cookie; GET /auth/<provider>/callback checks the
// state, exchanges the code, reads the account's verified email and signs
// in the user with that email. An email the proxy has never seen gets an
// account only with QUEEN_PROXY_AUTOPROVISION, in
// QUEEN_PROXY_AUTOPROVISION_TENANT with QUEEN_PROXY_DEFAULT_ROLE on each of
// its clusters.

// OAuthProvider is one identity provider's client settings.
type OAuthProvider struct {
	ClientID, ClientSecret string
	// AllowedDomains limits Google accounts to these hosted domains
	// (GOOGLE_ALLOWED_DOMAINS); empty allows any.
	AllowedDomains []string
	// Endpoint and UserInfoURL default to the provider's own; tests point
	// them at a fake.
	Endpoint    oauth2.Endpoint
	UserInfoURL string
}

// OAuthConfig is the sign-in providers and who may join.
type OAuthConfig struct {
	Google, GitHub OAuthProvider
	// PublicURL is where browsers reach the proxy (QUEEN_PROXY_PUBLIC_URL),
	// for the callback addresses.
	PublicURL       string
	Autoprovision   bool   // QUEEN_PROXY_AUTOPROVISION
	AutoprovisionTo string // QUEEN_PROXY_AUTOPROVISION_TENANT (slug)
	DefaultRole     string // QUEEN_PROXY_DEFAULT_ROLE
}

var (
	googleEndpoint = oauth2.Endpoint{AuthURL: "https://accounts.google.com/o/oauth2/v2/auth",
		TokenURL: "https://oauth2.googleapis.com/token", AuthStyle: oauth2.AuthStyleInParams}
	githubEndpoint = oauth2.Endpoint{AuthURL: "https://github.com/login/oauth/authorize",
		TokenURL: "https://github.com/login/oauth/access_token", AuthStyle: oauth2.AuthStyleInParams}
)

const oauthStateCookie = "queen_oauth_state"

// identity is what a provider says of the person signing in.
type identity struct {
	email string
}

// oauthClient is a configured provider.
type oauthClient struct {
	name     string
	conf     *oauth2.Config
	userinfo string
	domains  []string
}

// oauthClients are the providers whose client id is set.
func (p *Proxy) oauthClients() map[string]*oauthClient {
	o := p.cfg.OAuth
	out := map[string]*oauthClient{}
	add := func(name string, pr OAuthProvider, ep oauth2.Endpoint, userinfo string, scopes []string) {
		if pr.ClientID == "" {
			return
		}
		if pr.Endpoint.AuthURL != "" {
			ep = pr.Endpoint
		}
		if pr.UserInfoURL != "" {
			userinfo = pr.UserInfoURL
		}
		out[name] = &oauthClient{name: name, userinfo: userinfo, domains: pr.AllowedDomains, conf: &oauth2.Config{
			ClientID: pr.ClientID, ClientSecret: pr.ClientSecret, Endpoint: ep, Scopes: scopes,
			RedirectURL: strings.TrimRight(o.PublicURL, "/") + "/auth/" + name + "/callback"}}
	}
	add("google", o.Google, googleEndpoint, "https://openidconnect.googleapis.com/v1/userinfo", []string{"openid", "email"})
	add("github", o.GitHub, githubEndpoint, "https://api.github.com/user/emails", []string{"user:email"})
	return out
}

// oauthRoute serves /auth/<provider>/login and /callback; false when path
// is neither.
func (p *Proxy) oauthRoute(ctx *fasthttp.RequestCtx, path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) != 3 || parts[0] != "auth" || (parts[2] != "login" && parts[2] != "callback") {
		return false
	}
	c := p.oauthClients()[parts[1]]
	if c == nil || string(ctx.Method()) != "GET" {
		return false
	}
	if parts[2] == "login" {
		state := randomToken()
		ctx.Response.Header.Add("Set-Cookie", oauthStateCookie+"="+state+"; Path=/auth; Max-Age=600; HttpOnly; SameSite=Lax"+p.secureFlag())
		ctx.Redirect(c.conf.AuthCodeURL(state), http.StatusFound)
		return true
	}
	state := string(ctx.QueryArgs().Peek("state"))
	if state == "" || !tokenEqual(state, string(ctx.Request.Header.Cookie(oauthStateCookie))) {
		writeError(ctx, newError(http.StatusBadRequest, "invalid", "the sign-in state does not match; start again"))
		return true
	}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	id, err := c.identify(octx, string(ctx.QueryArgs().Peek("code")))
	if err != nil {
		p.log.Info("proxy: sign-in refused", "provider", c.name, "err", err)
		writeError(ctx, newError(http.StatusUnauthorized, "unauthorized", "the provider did not confirm an allowed email"))
		return true
	}
	u, err := p.userForIdentity(octx, id)
	if err != nil {
		writeError(ctx, err)
		return true
	}
	token, err := p.issueSession(u, time.Now())
	if err != nil {
		writeError(ctx, err)
		return true
	}
	ctx.Response.Header.Add("Set-Cookie", sessionCookie+"="+token+"; Path=/; HttpOnly; SameSite=Lax"+p.secureFlag())
	ctx.Redirect("/console", http.StatusFound)
	return true
}

func (p *Proxy) secureFlag() string {
	if p.TLS() {
		return "; Secure"
	}
	return ""
}

func randomToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// identify exchanges the code and reads the account's verified email.
func (c *oauthClient) identify(ctx context.Context, code string) (identity, error) {
	if code == "" {
		return identity{}, fmt.Errorf("no code")
	}
	tok, err := c.conf.Exchange(ctx, code)
	if err != nil {
		return identity{}, fmt.Errorf("exchange: %w", err)
	}
	resp, err := c.conf.Client(ctx, tok).Get(c.userinfo)
	if err != nil {
		return identity{}, fmt.Errorf("userinfo: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return identity{}, fmt.Errorf("userinfo: %d %v", resp.StatusCode, err)
	}
	var email string
	switch c.name {
	case "google":
		var info struct {
			Email    string `json:"email"`
			Verified bool   `json:"email_verified"`
			Domain   string `json:"hd"`
		}
		if err := json.Unmarshal(body, &info); err != nil || !info.Verified {
			return identity{}, fmt.Errorf("no verified email")
		}
		if len(c.domains) > 0 && !slices.Contains(c.domains, strings.ToLower(info.Domain)) {
			return identity{}, fmt.Errorf("domain %q is not allowed", info.Domain)
		}
		email = info.Email
	case "github":
		var emails []struct {
			Email    string `json:"email"`
			Primary  bool   `json:"primary"`
			Verified bool   `json:"verified"`
		}
		if err := json.Unmarshal(body, &emails); err != nil {
			return identity{}, err
		}
		for _, e := range emails {
			if e.Primary && e.Verified {
				email = e.Email
			}
		}
	}
	if email == "" {
		return identity{}, fmt.Errorf("no verified primary email")
	}
	return identity{email: strings.ToLower(email)}, nil
}

// userForIdentity finds the user with the identity's email, or makes one
// when autoprovisioning is on.
func (p *Proxy) userForIdentity(ctx context.Context, id identity) (*User, error) {
	var r ref
	found, err := p.store.get(ctx, userEmailKey(id.email), &r)
	if err != nil {
		return nil, err
	}
	if found {
		var u User
		if found, err = p.store.get(ctx, userKey(r.ID), &u); err != nil || found {
			return &u, err
		}
	}
	o := p.cfg.OAuth
	if !o.Autoprovision || o.AutoprovisionTo == "" {
		return nil, newError(http.StatusForbidden, "forbidden", "no account for this identity")
	}
	var t Tenant
	if found, err := p.store.get(ctx, tenantKey(o.AutoprovisionTo), &t); err != nil || !found {
		return nil, fmt.Errorf("%w: QUEEN_PROXY_AUTOPROVISION_TENANT %q does not exist", ErrConflict, o.AutoprovisionTo)
	}
	clusters, err := p.store.tenantClusters(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	var u *User
	for _, c := range clusters {
		if u, _, err = p.store.ensureUser(ctx, "", id.email, &t, c.ID, o.DefaultRole, ""); err != nil {
			return nil, err
		}
	}
	if u == nil {
		if u, _, err = p.store.ensureUser(ctx, "", id.email, &t, "", "", ""); err != nil {
			return nil, err
		}
	}
	p.log.Info("proxy: account autoprovisioned", "email", id.email, "tenant", t.Slug, "role", o.DefaultRole)
	return u, nil
}
