package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"

	"github.com/tether-dev/tether/internal/task"
)

// A task's preamble (task.Preamble) is kept as JSON in tasks.preamble (the
// migration 00009), NULL for a task without one. What is stored is the
// preamble as encodePreamble writes it; what a read returns, and what a
// repeated submit is compared with, is that JSON decoded again, so an empty
// list and a missing one, or two maps in another order, are the same.

// checkPreamble checks a submit's preamble before the database is touched
// and returns it as a read will return it (a copy: the caller's is never
// kept). nil stays nil.
func checkPreamble(p *task.Preamble) (*task.Preamble, error) {
	if p == nil {
		return nil, nil
	}
	if len(p.Items) > task.MaxPreambleItems {
		return nil, task.Errorf(task.CodeInvalid, "preamble: at most %d items, not %d",
			task.MaxPreambleItems, len(p.Items))
	}
	// The JSON holds every text whole, so texts over the limit are refused
	// before anything is walked or encoded.
	size := len(p.Instructions)
	for _, it := range p.Items {
		size += len(it.Text)
	}
	if size > task.MaxPreambleBytes {
		return nil, errPreambleTooLarge()
	}
	for i, it := range p.Items {
		switch it.Role {
		case task.ItemUser, task.ItemAssistant, task.ItemSystem, task.ItemDeveloper:
		default:
			return nil, task.Errorf(task.CodeInvalid,
				"preamble item %d: role must be user, assistant, system or developer", i)
		}
		if !isText(it.Text) {
			return nil, task.Errorf(task.CodeInvalid, "preamble item %d: text must be UTF-8 text without NUL", i)
		}
	}
	if !isText(p.Instructions) {
		return nil, task.Errorf(task.CodeInvalid, "preamble: instructions must be UTF-8 text without NUL")
	}
	// Postgres keeps no NUL in jsonb, and encoding/json would replace
	// invalid UTF-8 silently: every other string (model, metadata, option
	// names, and any field the preamble gains) is checked the same way.
	if !allText(reflect.ValueOf(*p)) {
		return nil, task.Errorf(task.CodeInvalid, "preamble: every text must be UTF-8 without NUL")
	}
	for k, v := range p.Options {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, task.Errorf(task.CodeInvalid, "preamble: option %q must be a finite number", k)
		}
	}
	b, err := encodePreamble(p)
	if err != nil {
		return nil, task.Errorf(task.CodeInvalid, "preamble cannot be written as JSON")
	}
	if len(b) > task.MaxPreambleBytes {
		return nil, errPreambleTooLarge()
	}
	return decodePreamble(b)
}

func errPreambleTooLarge() error {
	return task.Errorf(task.CodeTooLarge, "preamble is over %d bytes of JSON", task.MaxPreambleBytes)
}

// encodePreamble is the JSON stored for p: nil (SQL NULL) for nil. HTML
// characters are not escaped, so a preamble of code is measured by what it
// holds.
func encodePreamble(p *task.Preamble) ([]byte, error) {
	if p == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("encode preamble: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decodePreamble reads a stored preamble; nil (SQL NULL) is none.
func decodePreamble(b []byte) (*task.Preamble, error) {
	if b == nil {
		return nil, nil
	}
	p := new(task.Preamble)
	if err := json.Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("decode preamble: %w", err)
	}
	return p, nil
}

// allText reports whether every string in v (fields, elements, map keys
// and values, all the way down) is text Postgres can keep (isText).
func allText(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return isText(v.String())
	case reflect.Pointer, reflect.Interface:
		return v.IsNil() || allText(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if !allText(v.Field(i)) {
				return false
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if !allText(v.Index(i)) {
				return false
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if !allText(it.Key()) || !allText(it.Value()) {
				return false
			}
		}
	}
	return true
}

// samePreamble reports whether two preambles, each as a read returns it
// (decodePreamble, checkPreamble), are the same: nil is the same only as nil.
func samePreamble(a, b *task.Preamble) bool {
	return reflect.DeepEqual(a, b)
}
