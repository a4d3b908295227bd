package adapters

import (
	"fmt"
	"strconv"
	"time"
)

func badOption(name, value, want string) error {
	return fmt.Errorf("%w: option %s=%q: want %s", ErrInvalidDSN, name, value, want)
}

func durationOption(q map[string][]string, name string) (time.Duration, error) {
	v := first(q, name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, badOption(name, v, "a non-negative duration such as 30m")
	}
	return d, nil
}

func boolOption(q map[string][]string, name string) (bool, error) {
	v := first(q, name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badOption(name, v, "true or false")
	}
	return b, nil
}

func first(q map[string][]string, name string) string {
	if vs := q[name]; len(vs) > 0 {
		return vs[len(vs)-1]
	}
	return ""
}
