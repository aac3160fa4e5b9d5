package try

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Target is one request to send: a method and a path (with its query),
// relative to whichever replica gets the copy, and its own headers and
// body. The body is never written to any output.
type Target struct {
	// Method is the HTTP method; empty means GET.
	Method string
	// Path is the request's path and query ("/items/42?full=1"); it
	// begins with a slash.
	Path string
	// Header holds the target's own headers, sent after (and over) the
	// headers common to every request.
	Header http.Header
	// Body is the request body; nil sends none.
	Body []byte
}

func (t Target) method() string {
	if t.Method == "" {
		return http.MethodGet
	}
	return t.Method
}

// safeMethod reports whether m is a method that try sends without
// --allow-writes: GET or HEAD.
func safeMethod(m string) bool { return m == "" || m == http.MethodGet || m == http.MethodHead }

// maxTargetsBytes bounds a targets or values file.
const maxTargetsBytes = 64 << 20

// maxBody bounds one target's body file.
const maxBody = 16 << 20

// ParseHTTPTargets reads targets in vegeta's HTTP format: each target is a
// line "METHOD URL", then optional header lines "Name: value", then an
// optional body line "@file" (a path, relative to dir when not absolute),
// and targets are separated by blank lines. Lines starting with '#' are
// comments. URL is a path ("/items/1"), or a full URL whose scheme and host
// are one of replicas'; either way only its path and query are kept.
func ParseHTTPTargets(r io.Reader, dir string, replicas []string) ([]Target, error) {
	origins, err := replicaOrigins(replicas)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(io.LimitReader(r, maxTargetsBytes))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []Target
	var cur *Target
	line := 0
	flush := func() {
		if cur != nil {
			out = append(out, *cur)
			cur = nil
		}
	}
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		switch {
		case s == "":
			flush()
			continue
		case strings.HasPrefix(s, "#"):
			continue
		}
		if cur == nil {
			method, rawURL, ok := strings.Cut(s, " ")
			if !ok || method == "" || strings.ToUpper(method) != method {
				return nil, fmt.Errorf("%w: targets line %d: want \"METHOD /path\" (such as GET /items/1), found %q", ErrTargets, line, s)
			}
			p, err := targetPath(strings.TrimSpace(rawURL), origins)
			if err != nil {
				return nil, fmt.Errorf("%w: targets line %d: %w", ErrTargets, line, err)
			}
			cur = &Target{Method: method, Path: p, Header: http.Header{}}
			continue
		}
		if strings.HasPrefix(s, "@") {
			name := strings.TrimSpace(s[1:])
			if !filepath.IsAbs(name) {
				name = filepath.Join(dir, name)
			}
			b, err := readBounded(name, maxBody)
			if err != nil {
				return nil, fmt.Errorf("%w: targets line %d: body file: %w", ErrTargets, line, err)
			}
			cur.Body = b
			continue
		}
		name, value, ok := strings.Cut(s, ":")
		name = strings.TrimSpace(name)
		if !ok || !validHeaderName(name) {
			return nil, fmt.Errorf("%w: targets line %d: want a header line \"Name: value\" or a body line \"@file\" after the request line, or a blank line between targets", ErrTargets, line)
		}
		cur.Header.Add(name, strings.TrimSpace(value))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: reading targets: %w", ErrTargets, err)
	}
	flush()
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: the targets file holds no target", ErrTargets)
	}
	return out, nil
}

// jsonTarget is one line of vegeta's JSON format.
type jsonTarget struct {
	Method string              `json:"method"`
	URL    string              `json:"url"`
	Header map[string][]string `json:"header"`
	Body   []byte              `json:"body"` // base64, as vegeta writes it
}

// ParseJSONTargets reads targets in vegeta's JSON lines format: one object
// per line, {"method": "GET", "url": "/items/1", "header": {"Name":
// ["value"]}, "body": "base64"}. url is a path or a full URL of one of
// replicas, as for ParseHTTPTargets.
func ParseJSONTargets(r io.Reader, replicas []string) ([]Target, error) {
	origins, err := replicaOrigins(replicas)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(io.LimitReader(r, maxTargetsBytes))
	sc.Buffer(make([]byte, 64<<10), maxBody*2)
	var out []Target
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var jt jsonTarget
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&jt); err != nil {
			return nil, fmt.Errorf("%w: targets line %d: want {\"method\",\"url\",\"header\",\"body\"}: %v", ErrTargets, line, err)
		}
		if jt.Method == "" {
			jt.Method = http.MethodGet
		}
		if strings.ToUpper(jt.Method) != jt.Method || strings.ContainsAny(jt.Method, " \t") {
			return nil, fmt.Errorf("%w: targets line %d: method %q: write it in capitals, such as GET", ErrTargets, line, jt.Method)
		}
		p, err := targetPath(jt.URL, origins)
		if err != nil {
			return nil, fmt.Errorf("%w: targets line %d: %w", ErrTargets, line, err)
		}
		h := http.Header{}
		for name, vs := range jt.Header {
			if !validHeaderName(name) {
				return nil, fmt.Errorf("%w: targets line %d: %q is not a header name", ErrTargets, line, name)
			}
			for _, v := range vs {
				h.Add(name, v)
			}
		}
		out = append(out, Target{Method: jt.Method, Path: p, Header: h, Body: jt.Body})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: reading targets: %w", ErrTargets, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: the targets file holds no target", ErrTargets)
	}
	return out, nil
}

// TemplateTargets makes one target of method per value, each value
// escaped into the template's {key}: as a path segment before any '?', as
// a query value after it. The template is a path ("/items/{key}").
func TemplateTargets(method, template string, values []string) ([]Target, error) {
	if !strings.HasPrefix(template, "/") {
		return nil, fmt.Errorf("%w: --url %q: write a path beginning with /, such as /items/{key}", ErrTargets, template)
	}
	i := strings.Index(template, "{key}")
	if i < 0 {
		return nil, fmt.Errorf("%w: --url %q has no {key} for the values to go into", ErrTargets, template)
	}
	inQuery := strings.Contains(template[:i], "?")
	if len(values) == 0 {
		return nil, fmt.Errorf("%w: the values file holds no value", ErrTargets)
	}
	out := make([]Target, 0, len(values))
	for _, v := range values {
		esc := url.PathEscape(v)
		if inQuery {
			esc = url.QueryEscape(v)
		}
		p := strings.ReplaceAll(template, "{key}", esc)
		if _, err := url.ParseRequestURI(p); err != nil {
			return nil, fmt.Errorf("%w: --url %q with value %q: %v", ErrTargets, template, v, err)
		}
		out = append(out, Target{Method: method, Path: p, Header: http.Header{}})
	}
	return out, nil
}

// ReadValues reads one value per line, skipping blank lines; leading and
// trailing spaces are trimmed.
func ReadValues(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxTargetsBytes))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []string
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			out = append(out, s)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: reading values: %w", ErrTargets, err)
	}
	return out, nil
}

func readBounded(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, limit)
	}
	return b, nil
}

// origin is a scheme and a host:port in normal form.
type origin struct{ scheme, hostport string }

// parseOrigin parses a replica's base URL: a scheme (http or https), a
// host, and nothing else but an optional trailing slash.
func parseOrigin(s string) (origin, error) {
	u, err := url.Parse(s)
	if err != nil {
		return origin{}, fmt.Errorf("%q is not a URL: %v", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return origin{}, fmt.Errorf("%q: write a base URL with http:// or https://", s)
	}
	if u.User != nil {
		return origin{}, fmt.Errorf("%q carries credentials in the URL: pass them in a header with --header-env instead", redactURL(u))
	}
	if u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return origin{}, fmt.Errorf("%q: write the base URL alone (scheme, host and port), such as http://10.0.0.1:8080; paths go in the targets", s)
	}
	return originOf(u), nil
}

func originOf(u *url.URL) origin {
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return origin{scheme: u.Scheme, hostport: net.JoinHostPort(host, port)}
}

func replicaOrigins(replicas []string) (map[origin]bool, error) {
	m := map[origin]bool{}
	for _, r := range replicas {
		o, err := parseOrigin(r)
		if err != nil {
			return nil, fmt.Errorf("%w: --replica %w", ErrInvalid, err)
		}
		m[o] = true
	}
	return m, nil
}

// targetPath returns the path and query of raw, a path or a full URL of
// one of origins.
func targetPath(raw string, origins map[origin]bool) (string, error) {
	if raw == "" {
		return "", errors.New("empty URL: write a path such as /items/1")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL: %v", raw, err)
	}
	if u.Scheme != "" || u.Host != "" {
		if u.User != nil {
			return "", fmt.Errorf("%q carries credentials in the URL: pass them in a header with --header-env instead", redactURL(u))
		}
		if !origins[originOf(u)] {
			return "", fmt.Errorf("%w: %s://%s is not one of the --replica URLs: try sends only to the replicas given", ErrForeignHost, u.Scheme, u.Host)
		}
	} else if !strings.HasPrefix(u.Path, "/") {
		return "", fmt.Errorf("%q: write a path beginning with /, or a full URL of a replica", raw)
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p, nil
}

// redactURL is u without user information.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 127 || !(r == '-' || r == '_' || r == '.' || r == '!' || r == '#' || r == '$' || r == '%' || r == '&' || r == '\'' || r == '*' || r == '+' || r == '^' || r == '`' || r == '|' || r == '~' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			return false
		}
	}
	return true
}

// sensitiveWords mark a header name as carrying a credential.
var sensitiveWords = []string{"auth", "cookie", "token", "secret", "key", "session", "password", "passwd", "credential", "signature"}

// Sensitive reports whether a header of that name may carry a credential
// (Authorization, Cookie, X-Api-Key, anything naming a token, secret, key,
// session or password): its value is never echoed.
func Sensitive(name string) bool {
	n := strings.ToLower(textproto.CanonicalMIMEHeaderKey(name))
	for _, w := range sensitiveWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
