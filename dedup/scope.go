package dedup

import (
	"net/http"
	"strconv"
)

// DefaultScope is the default of Config.Scope: the namespace of a
// request's key is a hash of the credentials the request carries, so that
// two users who send the same key never share an outcome. It hashes
// (SHA-256) the values of the Authorization and Cookie headers and the
// client's TLS certificate, if any; the store sees the hash, never the
// credentials. A request without credentials gets the namespace of all
// such requests.
//
// The Host is left out on purpose: hedged copies go to replicas by their
// own addresses (hedgehttp sends each with its replica's Host), and a
// Host in the scope would make each copy a write of its own. A server
// that serves several sites from one store adds its site itself:
//
//	Scope: func(r *http.Request) string { return site(r) + " " + dedup.DefaultScope(r) }
//
// The hash changes with the credentials: a client that refreshes its
// token or has a cookie rotated between two copies of a write makes two
// writes of them. When the handler knows the account, a Scope that
// returns the account is better.
func DefaultScope(r *http.Request) string {
	var cert []byte
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		cert = r.TLS.PeerCertificates[0].Raw
	}
	return CredentialScope(r.Header.Values("Authorization"), r.Header.Values("Cookie"), cert)
}

// CredentialScope returns the namespace of DefaultScope for the given
// credentials: the Authorization values, the Cookie values and the
// client's TLS certificate (DER; nil when none), hashed with SHA-256. The
// gRPC interceptor (package dedupgrpc) uses it with the call's metadata.
func CredentialScope(authorization, cookies []string, clientCert []byte) string {
	parts := make([][]byte, 0, 6+len(authorization)+len(cookies))
	add := func(label string, vs ...[]byte) {
		parts = append(parts, []byte(label), []byte(strconv.Itoa(len(vs))))
		parts = append(parts, vs...)
	}
	strs := func(vs []string) [][]byte {
		b := make([][]byte, len(vs))
		for i, v := range vs {
			b[i] = []byte(v)
		}
		return b
	}
	add("authorization", strs(authorization)...)
	add("cookie", strs(cookies)...)
	if clientCert != nil {
		add("tls", clientCert)
	} else {
		add("tls")
	}
	return "c" + FingerprintOf(parts...).String()
}

// ScopedKey returns the store key under which the middleware and the gRPC
// interceptor keep key in scope (what Config.Scope returned): the
// scope's length, the scope and the key, so that no two (scope, key)
// pairs share a store key. It is also the Key of the claim that
// ClaimFromContext returns. A tool that reads the store, such as one
// that checks a request's record, finds it there: for a request without
// credentials under the default scope,
// ScopedKey(CredentialScope(nil, nil, nil), key).
func ScopedKey(scope, key string) string {
	return strconv.Itoa(len(scope)) + ":" + scope + ":" + key
}
