package adapters

import (
	"errors"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// mask replaces a password in Redact's output.
const mask = "xxxxx"

// Redact returns dsn with its secrets masked, for messages: the password
// of a URL's user part, and the value of every query parameter (and every
// key=value word of a keyword DSN such as pgx's "host=h password=p") whose
// name says it carries a credential (password, sentinel_password,
// sslpassword, token, secret, key, AWS_SESSION_TOKEN inside
// authMechanismProperties, and any unknown name holding pass, pwd,
// secret, token, key, credential, auth or sig; authSource, authMechanism
// and key_prefix name no secret and are shown).
//
// It works on strings that do not parse as URLs too (a password with an
// unescaped '%', ' ', '#', '/' or '@'): after the first "://", everything
// between the first ':' and the last '@' is the password. Redact errs on
// the side of hiding: a URL whose query holds an '@' after a ':' loses more
// than its password.
func Redact(dsn string) string {
	red, _ := redact(dsn)
	return red
}

// redact returns Redact(dsn) and the secrets it masked, as written.
func redact(dsn string) (red string, secrets []string) {
	i := strings.Index(dsn, "://")
	if i < 0 {
		return redactWords(dsn)
	}
	head, rest := dsn[:i+3], dsn[i+3:]
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		if colon := strings.IndexByte(rest[:at], ':'); colon >= 0 {
			secrets = append(secrets, rest[colon+1:at])
			rest = rest[:colon+1] + mask + rest[at:]
		}
	}
	q := strings.IndexByte(rest, '?')
	if q < 0 {
		return head + rest, secrets
	}
	query, frag := rest[q+1:], ""
	if h := strings.IndexByte(query, '#'); h >= 0 {
		query, frag = query[:h], query[h:]
	}
	var b strings.Builder
	for query != "" {
		param := query
		sep := strings.IndexAny(query, "&;")
		if sep >= 0 {
			param, query = query[:sep], query[sep:]
		} else {
			query = ""
		}
		if k, v, ok := strings.Cut(param, "="); ok && v != "" && sensitive(k) {
			secrets = append(secrets, v)
			param = k + "=" + mask
		}
		b.WriteString(param)
		if sep >= 0 {
			b.WriteByte(query[0])
			query = query[1:]
		}
	}
	return head + rest[:q+1] + b.String() + frag, secrets
}

// redactWords masks the values of credential words in a keyword DSN
// (key=value, space-separated, a value optionally in single quotes).
func redactWords(dsn string) (string, []string) {
	var secrets []string
	red := keywordRE.ReplaceAllStringFunc(dsn, func(m string) string {
		sub := keywordRE.FindStringSubmatch(m)
		if !sensitive(sub[2]) {
			return m
		}
		secrets = append(secrets, strings.Trim(sub[4], "'"))
		return sub[1] + sub[2] + sub[3] + mask
	})
	return red, secrets
}

var keywordRE = regexp.MustCompile(`(^|\s)([A-Za-z_][A-Za-z0-9_.-]*)(\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s']\S*)`)

// sensitive reports whether a parameter name says its value is a secret.
func sensitive(name string) bool {
	if u, err := url.QueryUnescape(name); err == nil {
		name = u
	}
	n := strings.NewReplacer("_", "", "-", "", ".", "").Replace(strings.ToLower(name))
	switch n {
	case "authsource", "authmechanism", "keyprefix":
		return false
	}
	for _, w := range []string{"pass", "pwd", "secret", "token", "key", "credential", "auth", "sig"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// scrub returns err with every occurrence of each secret (as written, and
// percent-decoded) in its message masked. errors.Is and errors.As still
// see err.
func scrub(err error, secrets ...string) error {
	if err == nil {
		return err
	}
	msg := err.Error()
	var forms []string
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		forms = append(forms, secret)
		for _, unescape := range []func(string) (string, error){url.PathUnescape, url.QueryUnescape} {
			if s, e := unescape(secret); e == nil {
				forms = append(forms, s)
				// as url.URL.String writes the decoded password again
				forms = append(forms, strings.TrimPrefix(url.UserPassword("u", s).String(), "u:"), url.QueryEscape(s))
			}
		}
	}
	// Longest first, so that a secret holding another is masked whole.
	sort.Slice(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	changed := false
	for _, f := range forms {
		if f != "" && f != mask && strings.Contains(msg, f) {
			msg = strings.ReplaceAll(msg, f, mask)
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &scrubbed{msg: msg, err: err}
}

// scrubbed is an error whose message had a password masked. It matches
// what err matches (errors.Is, errors.As) but has no Unwrap, so that code
// printing each error of the chain does not print the password.
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string        { return e.msg }
func (e *scrubbed) Is(target error) bool { return errors.Is(e.err, target) }
func (e *scrubbed) As(target any) bool   { return errors.As(e.err, target) }
