package override

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// The one notation of numbers (and bools) in overrides. A value of the
// file (bare or in quotes) and a variable's text are read by the same
// functions below, so that what one accepts the other accepts, and what one refuses
// the other refuses in the same words:
//
//   - a count (max_attempts, permits, burst, …) is decimal digits with no
//     leading zero: 3, 0, 4294967295;
//   - a fractional value (backoff_multiplier, ratio, requests_per_second,
//     …) is a count, or a count, a point and digits: 2, 0.25, 1.5; a
//     minus sign is read, so that a negative value is refused by the rule
//     it breaks;
//   - a duration is one or more such numbers, each followed by its unit
//     (ns, us or µs, ms, s, m, h): 200ms, 0.2s, 1m30s; a minus sign is
//     read as for a fractional value; a duration always has its unit, 0s
//     included;
//   - a bool is true or false.
//
// Everything else is refused: a sign "+", a fraction in a count (3.0), an
// exponent (1e1), a base prefix (0x10, 0o10, 0b10), a leading zero (010:
// YAML 1.1 reads it as octal, 8, where a reader sees 10), a "_" (1_0), a
// point without a digit on each side (.5, 5.), spaces, and a value that
// does not fit: a count above 4294967295, a fractional value beyond a
// float64 or too small for one to hold, a duration longer than about 292
// years or finer than a nanosecond, and for a bool yes, no, on, off, 1, 0,
// True or any other spelling. YAML and JSON accept some of these
// forms and Go's parsers others; an operator reading a file or an
// environment sees one number, so it has one notation here.

// parseBool reads a bool: true or false, nothing else; got is how the
// error shows the value.
func parseBool(text, got string) (bool, error) {
	switch text {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("must be true or false, got %s", got)
}

// countNotation says what a count must be, for its errors.
var countNotation = fmt.Sprintf("must be a whole number from 0 to %d, written in decimal digits as 3 (no sign, point, exponent, \"_\", leading zero or 0x)", uint32(math.MaxUint32))

// realNotation says what a fractional value must be, for its errors.
const realNotation = `must be a finite number written in decimal as 2 or 0.25 (no "+", exponent, "_", leading zero or 0x)`

// durationNotation says what a duration must be, after "not a duration: %q".
const durationNotation = `write a decimal number with its unit (ns, us, ms, s, m, h), as "200ms", "0.2s" or "1m30s" (no "+", exponent, "_" or leading zero)`

// maxNumberText is the longest text a number or duration may have: the
// smallest and largest float64 in decimal digits (about 330) fit, and a value of megabytes
// is refused at once rather than summed part by part (a 6 MB duration
// took 89 s to refuse under -race).
const maxNumberText = 1000

// tooLong refuses a text longer than maxNumberText, showing its start.
func tooLong(text string) error {
	if len(text) <= maxNumberText {
		return nil
	}
	return fmt.Errorf("is %d characters long (%.20q…); a number or duration here has at most %d", len(text), text, maxNumberText)
}

// parseCount reads a count; got is how the error shows the value.
func parseCount(text, got string) (uint32, error) {
	if err := tooLong(text); err != nil {
		return 0, err
	}
	if !decimal(text, false) {
		return 0, fmt.Errorf("%s, got %s", countNotation, got)
	}
	n, err := strconv.ParseUint(text, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("must be a whole number from 0 to %d, got %s", uint32(math.MaxUint32), got)
	}
	return uint32(n), nil
}

// parseReal reads a fractional value; got is how the error shows it.
func parseReal(text, got string) (float64, error) {
	if err := tooLong(text); err != nil {
		return 0, err
	}
	if !decimal(strings.TrimPrefix(text, "-"), true) {
		return 0, fmt.Errorf("%s, got %s", realNotation, got)
	}
	f, err := strconv.ParseFloat(text, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("must be a finite number that a float64 holds (at most about 1.8e308), got %s", got)
	case f == 0 && strings.Trim(text, "-0.") != "":
		// Below the smallest float64: read as 0, which it is not.
		return 0, fmt.Errorf("is too small for a float64 to hold, which would read it as 0, got %s", got)
	}
	return f, nil
}

// nanosIn are the units of a duration, in nanoseconds.
var nanosIn = map[string]int64{"ns": 1, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}

// parseDuration reads a duration; got is how the error shows it. It is
// computed exactly: a value that does not fit is refused, not wrapped or
// rounded.
func parseDuration(text, got string) (time.Duration, error) {
	if err := tooLong(text); err != nil {
		return 0, err
	}
	rest, negative := strings.CutPrefix(text, "-")
	total := new(big.Rat)
	for first := true; first || rest != ""; first = false {
		i := strings.IndexFunc(rest, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if i <= 0 {
			return 0, fmt.Errorf("not a duration: %s; %s", got, durationNotation)
		}
		num, unitAndRest := rest[:i], rest[i:]
		j := strings.IndexFunc(unitAndRest, func(r rune) bool { return r >= '0' && r <= '9' || r == '.' })
		if j < 0 {
			j = len(unitAndRest)
		}
		unit, ok := nanosIn[unitAndRest[:j]]
		if !ok || !decimal(num, true) {
			return 0, fmt.Errorf("not a duration: %s; %s", got, durationNotation)
		}
		r, _ := new(big.Rat).SetString(num)
		total.Add(total, r.Mul(r, new(big.Rat).SetInt64(unit)))
		rest = unitAndRest[j:]
	}
	if negative {
		total.Neg(total)
	}
	if !total.IsInt() {
		return 0, fmt.Errorf("not a duration: %s is finer than a nanosecond, which a duration counts in; %s", got, durationNotation)
	}
	n := total.Num()
	if !n.IsInt64() {
		return 0, fmt.Errorf("not a duration: %s is longer than a duration holds (%v, about 292 years)", got, time.Duration(math.MaxInt64))
	}
	return time.Duration(n.Int64()), nil
}

// decimal reports whether text is digits with no leading zero ("0", "12"),
// and, when fraction allows it, a point and one digit or more after them
// ("0.25"). No sign: the callers say which they read.
func decimal(text string, fraction bool) bool {
	whole, frac, hasPoint := strings.Cut(text, ".")
	if hasPoint && (!fraction || frac == "" || !digits(frac)) {
		return false
	}
	return digits(whole) && (whole == "0" || whole[0] != '0')
}

// digits reports whether s is one ASCII digit or more.
func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
