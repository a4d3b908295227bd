package adapters

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Query holds a store URL's options, parsed strictly: a ';' separator or
// a malformed escape is an error (url.URL.Query drops such pairs
// silently), an option given twice is an error, and an option the scheme
// does not know is an error listing the ones it knows, unless the scheme
// passes other options through to its driver. Every error wraps
// ErrInvalidDSN.
type Query struct {
	scheme string
	known  []string
	vals   map[string]string
	rest   url.Values
}

// ParseQuery parses u's query; known lists the options u's scheme takes.
func ParseQuery(u *url.URL, known ...string) (*Query, error) {
	return parseQuery(u, false, known)
}

// ParsePassthroughQuery is ParseQuery for schemes whose driver takes
// options of its own (go-redis's dial_timeout, the MongoDB driver's
// replicaSet, …): an option not in known is kept for the driver, which
// validates it; DriverURL returns u with only those.
func ParsePassthroughQuery(u *url.URL, known ...string) (*Query, error) {
	return parseQuery(u, true, known)
}

func parseQuery(u *url.URL, passthrough bool, known []string) (*Query, error) {
	q := &Query{scheme: strings.ToLower(u.Scheme), known: known, vals: map[string]string{}, rest: url.Values{}}
	if strings.Contains(u.RawQuery, ";") {
		return nil, fmt.Errorf("%w: ';' in the query of a %s URL: separate options with '&', and write a literal ';' as %%3B", ErrInvalidDSN, q.scheme)
	}
	all, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: the query of a %s URL: a '%%' not followed by two hex digits (write a literal '%%' as %%25)", ErrInvalidDSN, q.scheme)
	}
	names := make([]string, 0, len(all))
	for k := range all {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		vs := all[k]
		switch {
		case slices.Contains(known, k):
			if len(vs) > 1 {
				return nil, fmt.Errorf("%w: option %s given %d times", ErrInvalidDSN, k, len(vs))
			}
			q.vals[k] = vs[0]
		case passthrough:
			q.rest[k] = vs
		default:
			return nil, fmt.Errorf("%w: unknown option %q for %s (known: %s)", ErrInvalidDSN, k, q.scheme, q.knownList())
		}
	}
	return q, nil
}

func (q *Query) knownList() string {
	if len(q.known) == 0 {
		return "none"
	}
	return strings.Join(q.known, ", ")
}

// Has reports whether option name was given.
func (q *Query) Has(name string) bool {
	_, ok := q.vals[name]
	return ok
}

// Get returns option name, or "" when it was not given.
func (q *Query) Get(name string) string { return q.vals[name] }

// Duration returns option name as a non-negative duration such as 30m; 0
// when it was not given.
func (q *Query) Duration(name string) (time.Duration, error) {
	v, ok := q.vals[name]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, BadOption(name, v, "a non-negative duration such as 30m")
	}
	return d, nil
}

// Bool returns option name as true or false (strconv.ParseBool's forms);
// false when it was not given.
func (q *Query) Bool(name string) (bool, error) {
	v, ok := q.vals[name]
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, BadOption(name, v, "true or false")
	}
	return b, nil
}

// Int returns option name as a non-negative integer; 0 when it was not
// given.
func (q *Query) Int(name string) (int, error) {
	v, ok := q.vals[name]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, BadOption(name, v, "a non-negative integer")
	}
	return n, nil
}

// OneOf returns option name when it is one of values; "" when it was not
// given.
func (q *Query) OneOf(name string, values ...string) (string, error) {
	v, ok := q.vals[name]
	if !ok || slices.Contains(values, v) {
		return v, nil
	}
	return "", BadOption(name, v, strings.Join(values, " or "))
}

// Passthrough returns the options kept for the driver.
func (q *Query) Passthrough() url.Values { return q.rest }

// DriverURL returns u as a string whose query holds only the options kept
// for the driver, for a backend's own URL parser.
func (q *Query) DriverURL(u *url.URL) string {
	v := *u
	v.RawQuery = q.rest.Encode()
	v.ForceQuery = false
	return v.String()
}

// BadOption returns the error for option name with a value that is not
// what the backend wants, wrapping ErrInvalidDSN.
func BadOption(name, value, want string) error {
	return fmt.Errorf("%w: option %s=%q: want %s", ErrInvalidDSN, name, value, want)
}
