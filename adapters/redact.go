package adapters

import (
	"errors"
	"net/url"
	"regexp"
	"slices"
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
// between the first ':' and the last '@' is the password, and everything
// after the first '?' the query. Redact errs on the side of hiding: a URL
// whose query holds an '@' after a ':' loses more than its password, and a
// credential parameter of the query is masked to the next '&' or ';'
// wherever it stands, also when a '?' in the password starts the query
// early (its value then runs on past the password's '@').
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
	var hide []span // of rest
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		if colon := strings.IndexByte(rest[:at], ':'); colon >= 0 {
			hide = append(hide, span{colon + 1, at})
		}
	}
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		hide = append(hide, credentialValues(rest, q+1)...)
	}
	for _, h := range hide {
		secrets = append(secrets, rest[h.from:h.to])
	}
	return head + masked(rest, hide), secrets
}

// span is a byte range [from, to) of a string.
type span struct{ from, to int }

// masked returns s with each run of overlapping or touching spans of hide
// replaced by one mask.
func masked(s string, hide []span) string {
	if len(hide) == 0 {
		return s
	}
	slices.SortFunc(hide, func(a, b span) int { return a.from - b.from })
	var b strings.Builder
	done := 0
	for k := 0; k < len(hide); {
		from, to := hide[k].from, hide[k].to
		for k++; k < len(hide) && hide[k].from <= to; k++ {
			to = max(to, hide[k].to)
		}
		b.WriteString(s[done:from])
		b.WriteString(mask)
		done = to
	}
	b.WriteString(s[done:])
	return b.String()
}

// credentialValues returns where the values of the credential parameters
// of the query starting at s[from:] stand: name=value pairs separated by
// '&' or ';', a value running to the next separator whatever it holds. A
// name is read after its last '?', so that where a '?' in a password
// starts the query early, a host and path before the real query name no
// credential.
func credentialValues(s string, from int) []span {
	var out []span
	for from <= len(s) {
		end := len(s)
		if sep := strings.IndexAny(s[from:], "&;"); sep >= 0 {
			end = from + sep
		}
		if k, v, ok := strings.Cut(s[from:end], "="); ok && v != "" && sensitive(k[strings.LastIndexByte(k, '?')+1:]) {
			out = append(out, span{end - len(v), end})
		}
		from = end + 1
	}
	return out
}

// redactWords masks the values of credential words in a keyword DSN
// (key=value, space-separated), read as pgx and libpq read them: a value in
// single quotes, or bare up to the first space; in both a backslash
// escapes the next character (a space included), and a quote left open
// runs to the end. It errs on the side of hiding: a credential word is
// masked wherever a word may start (after a space or a quote), also inside
// another word's value ("a= password=p", "a='x password=p"). A DSN longer
// than maxWordsDSN, which no driver setting needs, is masked whole.
func redactWords(dsn string) (string, []string) {
	if len(dsn) > maxWordsDSN {
		return mask, []string{dsn}
	}
	var hide []span
	var secrets []string
	for i := 0; i < len(dsn); i++ {
		if i > 0 && !strings.ContainsRune(" \t\n\r\v\f'", rune(dsn[i-1])) {
			continue
		}
		m := keywordRE.FindStringSubmatchIndex(dsn[i:])
		if m == nil || !sensitive(dsn[i+m[2]:i+m[3]]) {
			continue
		}
		hide = append(hide, span{i + m[6], i + m[7]})
		written := dsn[i+m[6] : i+m[7]]
		if strings.HasPrefix(written, "'") {
			written = strings.TrimSuffix(written[1:], "'")
		}
		secrets = append(secrets, written, wordEscape.ReplaceAllString(written, "$1"))
	}
	return masked(dsn, hide), secrets
}

// maxWordsDSN bounds the keyword DSNs redactWords reads word by word (it
// may try a match from every space, each to the end of the string).
const maxWordsDSN = 4096

var (
	keywordRE  = regexp.MustCompile(`(?s)^([A-Za-z_][A-Za-z0-9_.-]*)(\s*=\s*)('(?:[^'\\]|\\.)*(?:'|\\?$)|(?:[^\s'\\]|\\.)(?:[^\s\\]|\\.)*\\?)`)
	wordEscape = regexp.MustCompile(`(?s)\\(.)`)
)

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
