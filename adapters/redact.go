package adapters

import (
	"errors"
	"net/url"
	"strings"
)

// mask replaces a password in Redact's output.
const mask = "xxxxx"

// Redact returns dsn with its password masked, for messages. It works on
// strings that do not parse as URLs too (a password with an unescaped
// '%', ' ', '#', '/' or '@'): after the first "://", everything between
// the first ':' and the last '@' is the password. A string without "://"
// or without both is returned as it is.
//
// Redact errs on the side of hiding: a URL whose query holds an '@' after
// a ':' loses more than its password.
func Redact(dsn string) string {
	red, _ := redact(dsn)
	return red
}

// redact returns Redact(dsn) and the password it masked, as written.
func redact(dsn string) (red, secret string) {
	i := strings.Index(dsn, "://")
	if i < 0 {
		return dsn, ""
	}
	head, rest := dsn[:i+3], dsn[i+3:]
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return dsn, ""
	}
	colon := strings.IndexByte(rest[:at], ':')
	if colon < 0 {
		return dsn, ""
	}
	return head + rest[:colon+1] + mask + rest[at:], rest[colon+1 : at]
}

// scrub returns err with every occurrence of secret (as written, and
// percent-decoded) in its message masked. errors.Is and errors.As still
// see err.
func scrub(err error, secret string) error {
	if err == nil || secret == "" {
		return err
	}
	msg := err.Error()
	forms := []string{secret}
	for _, unescape := range []func(string) (string, error){url.PathUnescape, url.QueryUnescape} {
		if s, e := unescape(secret); e == nil {
			forms = append(forms, s)
			// as url.URL.String writes the decoded password again
			forms = append(forms, strings.TrimPrefix(url.UserPassword("u", s).String(), "u:"))
		}
	}
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
