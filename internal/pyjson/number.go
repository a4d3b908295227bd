package pyjson

import (
	"math"
	"strconv"
)

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number parses a number literal at p.pos the way CPython's scanner does:
// without fraction and exponent it is an int, otherwise a float.
func (p *parser) number() error {
	src := p.src
	start := p.pos
	i := start
	if src[i] == '-' {
		i++
		if i >= len(src) {
			return syntaxError(start, "expecting value")
		}
		if src[i] == 'I' {
			return p.token("-Infinity")
		}
	}
	switch {
	case src[i] == '0':
		i++
	case src[i] >= '1' && src[i] <= '9':
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	default:
		return syntaxError(start, "expecting value")
	}
	isFloat := false
	// A '.' or 'e' not followed by digits ends the number (CPython backtracks);
	// the caller then rejects the stray character.
	if i+1 < len(src) && src[i] == '.' && isDigit(src[i+1]) {
		isFloat = true
		i += 2
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		j := i + 1
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		if j < len(src) && isDigit(src[j]) {
			isFloat = true
			for j < len(src) && isDigit(src[j]) {
				j++
			}
			i = j
		}
	}
	k := kindInt
	if isFloat {
		k = kindFloat
	} else {
		digits := i - start
		if src[start] == '-' {
			digits--
		}
		if digits > maxIntDigits {
			return syntaxError(start, "integer literal exceeds CPython's 4300-digit int conversion limit")
		}
	}
	idx := len(p.nodes)
	p.nodes = append(p.nodes, node{kind: k, next: int32(idx + 1), lo: int32(start), hi: int32(i)})
	p.pos = i
	return nil
}

// appendInt appends the repr of the Python int whose JSON literal is lit.
// JSON forbids leading zeros, so the literal is already canonical except for
// "-0", which is the int 0.
func appendInt(dst, lit []byte) []byte {
	if len(lit) == 2 && lit[0] == '-' && lit[1] == '0' {
		return append(dst, '0')
	}
	return append(dst, lit...)
}

// parseFloat converts a float literal exactly as CPython's float() does:
// correctly rounded, overflow to ±Inf, underflow to signed zero; the
// tokens NaN, Infinity and -Infinity are the values they name.
func parseFloat(lit []byte) float64 {
	// The literal is syntactically valid (ParseFloat reads the tokens too),
	// so the only possible error is ErrRange, where ParseFloat already
	// returns ±Inf (or ±0).
	f, _ := strconv.ParseFloat(string(lit), 64)
	return f
}

// appendFloat appends float.__repr__(f) as json.dumps writes it, with
// Infinity and -Infinity for the infinities (allow_nan=True).
func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	}
	// Shortest round-trip digits in Go's scientific layout, d[.ddd]e±XX,
	// which is exactly Python's layout when Python uses an exponent: no
	// trailing ".0" on the mantissa, exponent with a sign and at least two
	// digits.
	var tmp [32]byte
	s := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	ePos := len(s) - 1
	for s[ePos] != 'e' {
		ePos--
	}
	e := 0
	for _, c := range s[ePos+2:] {
		e = e*10 + int(c-'0')
	}
	if s[ePos+1] == '-' {
		e = -e
	}
	if e < -4 || e >= 16 {
		return append(dst, s...)
	}
	// Fixed notation: lay the digits out around the decimal point.
	mant := s[:ePos]
	if mant[0] == '-' {
		dst = append(dst, '-')
		mant = mant[1:]
	}
	var digits [24]byte
	nd := 0
	for _, c := range mant {
		if c != '.' {
			digits[nd] = c
			nd++
		}
	}
	if e < 0 {
		dst = append(dst, '0', '.')
		for i := -1; i > e; i-- {
			dst = append(dst, '0')
		}
		return append(dst, digits[:nd]...)
	}
	intDigits := e + 1
	if nd <= intDigits {
		dst = append(dst, digits[:nd]...)
		for i := nd; i < intDigits; i++ {
			dst = append(dst, '0')
		}
		return append(dst, '.', '0')
	}
	dst = append(dst, digits[:intDigits]...)
	dst = append(dst, '.')
	return append(dst, digits[intDigits:nd]...)
}
