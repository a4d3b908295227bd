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
// key=value word of a keyword DSN such as pgx's "host=h password=p") that
// is not a known option naming no secret. So a credential option
// (password, sentinel_password, sslpassword, token, AWS_SESSION_TOKEN
// inside authMechanismProperties, any name holding pass, pwd, secret,
// token, key, credential, auth or sig) is masked, and so is every option
// no backend or driver knows (a mistyped "passwrd=", a SQLite
// "_pragma=key(…)"): only the values of the options listed in
// shownOptions (sslmode, ttl, replicaSet, authSource, key_prefix, …) are
// shown.
//
// Every form is read: scheme://…, scheme:opaque (sqlite:rel.db?…), a
// keyword DSN, and a string with no scheme at all (u:p@h/db), whose
// password is what stands between the first ':' and the last '@'. It
// works on strings that do not parse as URLs too (a password with an
// unescaped '%', ' ', '#', '/' or '@'): after the first "://", everything
// between the first ':' and the last '@' is the password, and everything
// after the first '?' the query. Redact errs on the side of hiding: a URL
// whose query holds an '@' after a ':' loses more than its password, and a
// hidden parameter of the query is masked to the next '&' or ';'
// wherever it stands, also when a '?' in the password starts the query
// early (its value then runs on past the password's '@').
func Redact(dsn string) string {
	red, _ := redact(dsn)
	return red
}

// redact returns Redact(dsn) and the secrets it masked, as written.
func redact(dsn string) (red string, secrets []string) {
	if i := strings.Index(dsn, "://"); i >= 0 {
		return redactURL(dsn[:i+3], dsn[i+3:], false)
	}
	if l := strings.ToLower(dsn); strings.HasPrefix(l, "sqlite:") || strings.HasPrefix(l, "memory:") {
		// An opaque URL of a scheme without user or password
		// (sqlite:rel:x@y.db names a file): only its query is hidden.
		i := strings.IndexByte(dsn, ':') + 1
		return redactURL(dsn[:i], dsn[i:], true)
	}
	// No scheme, or one unknown: a keyword DSN, or a URL without its
	// scheme (u:p@h/db); mask what either reading calls a secret.
	if len(dsn) > maxWordsDSN {
		return mask, []string{dsn}
	}
	words := wordValues(dsn)
	for _, h := range words {
		secrets = appendWordSecret(secrets, dsn[h.from:h.to], h.unknown)
	}
	hide := append(words, urlSecrets(dsn)...)
	for _, h := range hide[len(words):] {
		secrets = appendSecret(secrets, dsn[h.from:h.to], h.unknown)
	}
	return masked(dsn, hide), secrets
}

// redactURL masks the secrets of rest, the part of a URL after head (its
// scheme and "://" or ":");
// queryOnly says that rest holds no password.
func redactURL(head, rest string, queryOnly bool) (string, []string) {
	var hide []span
	if !queryOnly {
		hide = urlSecrets(rest)
	} else if q := strings.IndexByte(rest, '?'); q >= 0 {
		hide = hiddenValues(rest, q+1)
	}
	var secrets []string
	for _, h := range hide {
		secrets = appendSecret(secrets, rest[h.from:h.to], h.unknown)
	}
	return head + masked(rest, hide), secrets
}

// urlSecrets returns where the password and the hidden query values of
// rest, a URL after its scheme, stand.
func urlSecrets(rest string) []span {
	var hide []span
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		if colon := strings.IndexByte(rest[:at], ':'); colon >= 0 {
			hide = append(hide, span{from: colon + 1, to: at})
		}
	}
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		hide = append(hide, hiddenValues(rest, q+1)...)
	}
	return hide
}

// appendSecret adds a masked value to the secrets an error is scrubbed of.
// The value of an option that is hidden only for being unknown is added
// when it has 4 bytes or more: scrubbing every "1" or "on" from a
// driver's message would mangle it, and no driver echoes such a value.
func appendSecret(secrets []string, s string, unknown bool) []string {
	if unknown && len(s) < 4 {
		return secrets
	}
	return append(secrets, s)
}

// span is a byte range [from, to) of a string; unknown says it is hidden
// only for belonging to an option not known to hold no secret.
type span struct {
	from, to int
	unknown  bool
}

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

// hiddenValues returns where the values of the query starting at s[from:]
// that Redact hides stand: name=value pairs separated by '&' or ';', a
// value running to the next separator whatever it holds. A name is read
// after its last '?', so that where a '?' in a password starts the query
// early, a host and path before the real query name no credential.
func hiddenValues(s string, from int) []span {
	var out []span
	for from <= len(s) {
		end := len(s)
		if sep := strings.IndexAny(s[from:], "&;"); sep >= 0 {
			end = from + sep
		}
		if k, v, ok := strings.Cut(s[from:end], "="); ok && v != "" {
			if h, unknown := hidden(k[strings.LastIndexByte(k, '?')+1:]); h {
				out = append(out, span{end - len(v), end, unknown})
			}
		}
		from = end + 1
	}
	return out
}

// wordValues returns where the hidden values of the words of a keyword
// DSN stand: those of credential words and of words no driver knows
// (key=value, space-separated, read as pgx and libpq read them: a value in
// single quotes, or bare up to the first space; in both a backslash
// escapes the next character (a space included), and a quote left open
// runs to the end). It errs on the side of hiding: a hidden word is
// masked wherever a word may start (after a space or a quote), also inside
// another word's value ("a= password=p", "a='x password=p"). A DSN longer
// than maxWordsDSN, which no driver setting needs, is masked whole.
func wordValues(dsn string) []span {
	var hide []span
	for i := 0; i < len(dsn); i++ {
		if i > 0 && !strings.ContainsRune(" \t\n\r\v\f'", rune(dsn[i-1])) {
			continue
		}
		m := keywordRE.FindStringSubmatchIndex(dsn[i:])
		if m == nil {
			continue
		}
		if h, unknown := hidden(dsn[i+m[2] : i+m[3]]); h {
			hide = append(hide, span{i + m[6], i + m[7], unknown})
		}
	}
	return hide
}

// appendWordSecret adds a word's value, as written and as the driver
// reads it, to the secrets an error is scrubbed of.
func appendWordSecret(secrets []string, written string, unknown bool) []string {
	if strings.HasPrefix(written, "'") {
		written = strings.TrimSuffix(written[1:], "'")
	}
	secrets = appendSecret(secrets, written, unknown)
	return appendSecret(secrets, wordEscape.ReplaceAllString(written, "$1"), unknown)
}

// maxWordsDSN bounds the keyword DSNs wordValues reads word by word (it
// may try a match from every space, each to the end of the string).
const maxWordsDSN = 4096

var (
	keywordRE  = regexp.MustCompile(`(?s)^([A-Za-z_][A-Za-z0-9_.-]*)(\s*=\s*)('(?:[^'\\]|\\.)*(?:'|\\?$)|(?:[^\s'\\]|\\.)(?:[^\s\\]|\\.)*\\?)`)
	wordEscape = regexp.MustCompile(`(?s)\\(.)`)
)

// sensitive reports whether a parameter name says its value is a secret.
func sensitive(name string) bool {
	n := normalName(name)
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

// hidden reports whether Redact hides the value of parameter name, and
// whether only for the name being unknown (not a credential's).
func hidden(name string) (hide, unknown bool) {
	if sensitive(name) {
		return true, false
	}
	return !shownOptions[normalName(name)], true
}

// normalName is a parameter name percent-decoded, in lower case, without
// '_', '-' or '.'.
func normalName(name string) string {
	if u, err := url.QueryUnescape(name); err == nil {
		name = u
	}
	return strings.NewReplacer("_", "", "-", "", ".", "").Replace(strings.ToLower(name))
}

// shownOptions are the options (as normalName writes them) whose values
// Redact shows: the adapters' own and the drivers' that name no secret.
// Every other option's value is hidden, for a mistyped or unknown option
// may hold a secret ("passwrd=…").
var shownOptions = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range []string{
		// the adapters'
		"sessions_table", "messages_table", "checkpoints_table", "busy_timeout", "synchronous", "schema",
		"sessions_collection", "messages_collection", "checkpoints_collection", "operations_collection",
		"ttl", "refresh_on_read", "max_batch_bytes", "layout", "key_prefix", "tls_ca_file", "wait_replicas", "wait_timeout", "held_conns",
		// go-redis's
		"db", "protocol", "client_name", "dial_timeout", "read_timeout", "write_timeout", "pool_fifo", "pool_size",
		"pool_timeout", "min_idle_conns", "max_idle_conns", "max_active_conns", "conn_max_idle_time", "conn_max_lifetime",
		"max_retries", "min_retry_backoff", "max_retry_backoff", "max_redirects", "read_only", "route_by_latency",
		"route_randomly", "skip_verify", "context_timeout_enabled", "unstable_resp3", "identity_suffix",
		// pgx's and libpq's
		"host", "hostaddr", "port", "user", "dbname", "database", "sslmode", "sslrootcert", "sslcert", "sslnegotiation",
		"connect_timeout", "application_name", "target_session_attrs", "search_path", "statement_timeout",
		"default_query_exec_mode", "statement_cache_capacity", "description_cache_capacity", "min_read_buffer_size",
		"pool_max_conns", "pool_min_conns", "pool_min_idle_conns", "pool_max_conn_lifetime", "pool_max_conn_lifetime_jitter",
		"pool_max_conn_idle_time", "pool_health_check_period", "servicefile", "service",
		// the MongoDB driver's
		"appname", "authMechanism", "authSource", "compressors", "connect", "connectTimeoutMS", "directConnection",
		"heartbeatFrequencyMS", "journal", "loadBalanced", "localThresholdMS", "maxConnecting", "maxIdleTimeMS",
		"maxPoolSize", "maxStalenessSeconds", "minPoolSize", "readConcernLevel", "readPreference", "readPreferenceTags",
		"replicaSet", "retryReads", "retryWrites", "serverMonitoringMode", "serverSelectionTimeoutMS",
		"serverSelectionTryOnce", "socketTimeoutMS", "srvMaxHosts", "srvServiceName", "ssl", "timeoutMS", "tls",
		"tlsAllowInvalidCertificates", "tlsAllowInvalidHostnames", "tlsCAFile", "tlsCertificateFile", "tlsInsecure",
		"tlsDisableOCSPEndpointCheck", "w", "wTimeoutMS", "zlibCompressionLevel", "zstdCompressionLevel",
	} {
		m[normalName(n)] = true
	}
	return m
}()

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
