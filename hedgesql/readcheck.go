package hedgesql

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotRead is matched (errors.Is) by the error of QueryRow's Scan and
// of Collect when the SQL does not start with a read statement's keyword.
var ErrNotRead = errors.New("hedgesql: not a read")

// checkRead refuses SQL whose first keyword (after white space, comments
// and opening parentheses) is not SELECT, WITH, VALUES, TABLE or SHOW. It
// is a guard against obvious mistakes, not a proof (see "Reads" in the
// package doc).
func checkRead(query string) error {
	kw := leadingWord(query)
	switch strings.ToUpper(kw) {
	case "SELECT", "WITH", "VALUES", "TABLE", "SHOW":
		return nil
	case "":
		return fmt.Errorf("%w: the SQL has no statement (or an unclosed comment): give a SELECT (or WITH, VALUES, TABLE, SHOW)", ErrNotRead)
	}
	return fmt.Errorf("%w: the statement starts with %q; hedged reads take SELECT, WITH, VALUES, TABLE or SHOW: send writes with Exec, on the primary", ErrNotRead, kw)
}

// leadingWord returns the run of ASCII letters that starts query once
// white space, "--" line comments, "/* */" block comments (nested) and
// opening parentheses are skipped; "" if there is none.
func leadingWord(query string) string {
	s := query
	for {
		t := strings.TrimLeft(s, " \t\r\n\f\v(")
		switch {
		case strings.HasPrefix(t, "--"):
			nl := strings.IndexByte(t, '\n')
			if nl < 0 {
				return ""
			}
			s = t[nl+1:]
		case strings.HasPrefix(t, "/*"):
			rest, ok := skipBlockComment(t)
			if !ok {
				return ""
			}
			s = rest
		default:
			end := strings.IndexFunc(t, func(r rune) bool {
				return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z')
			})
			if end < 0 {
				return t
			}
			return t[:end]
		}
	}
}

// skipBlockComment returns what follows the block comment that starts s
// (comments nest), or false if it is not closed.
func skipBlockComment(s string) (string, bool) {
	depth := 0
	for i := 0; i+1 < len(s); {
		switch s[i : i+2] {
		case "/*":
			depth++
			i += 2
		case "*/":
			depth--
			i += 2
			if depth == 0 {
				return s[i:], true
			}
		default:
			i++
		}
	}
	return "", false
}
