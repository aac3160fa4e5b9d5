package hedgepgx

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotRead is matched (errors.Is) by the error of a hedged read whose
// SQL does not start with a read statement's keyword.
var ErrNotRead = errors.New("hedgepgx: not a read")

// readKeywords are the statements a hedged read may start with.
var readKeywords = []string{"SELECT", "WITH", "VALUES", "TABLE", "SHOW"}

// checkRead refuses SQL whose first keyword (after white space and
// comments) is not that of a read statement: INSERT, UPDATE, DELETE,
// MERGE, CALL, DDL, COPY, and anything it cannot tell. It is a cheap guard
// against obvious mistakes, not a proof: a SELECT may call a function
// that writes, and a WITH may hold a DELETE (see "Reads" in the package
// doc).
func checkRead(sql string) error {
	kw := firstKeyword(sql)
	for _, k := range readKeywords {
		if strings.EqualFold(kw, k) {
			return nil
		}
	}
	if kw == "" {
		return fmt.Errorf("%w: the SQL has no statement: give a SELECT (or WITH, VALUES, TABLE, SHOW)", ErrNotRead)
	}
	return fmt.Errorf("%w: the statement starts with %q; hedged reads take SELECT, WITH, VALUES, TABLE or SHOW: send writes with Exec or ExecLSN, on the primary", ErrNotRead, kw)
}

// firstKeyword returns the first word of sql after white space, -- line
// comments and /* block comments */ (nested, as PostgreSQL nests them),
// and opening parentheses; "" if there is none or a comment is not closed.
// The word is a run of ASCII letters.
func firstKeyword(sql string) string {
	i := 0
	for i < len(sql) {
		switch c := sql[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '(':
			i++
		case strings.HasPrefix(sql[i:], "--"):
			nl := strings.IndexByte(sql[i:], '\n')
			if nl < 0 {
				return ""
			}
			i += nl + 1
		case strings.HasPrefix(sql[i:], "/*"):
			depth := 0
			for {
				switch {
				case i >= len(sql):
					return ""
				case strings.HasPrefix(sql[i:], "/*"):
					depth++
					i += 2
				case strings.HasPrefix(sql[i:], "*/"):
					depth--
					i += 2
				default:
					i++
				}
				if depth == 0 {
					break
				}
			}
		default:
			j := i
			for j < len(sql) && ('a' <= sql[j]|0x20 && sql[j]|0x20 <= 'z') {
				j++
			}
			return sql[i:j]
		}
	}
	return ""
}
