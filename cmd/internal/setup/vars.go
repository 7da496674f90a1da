package setup

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strings"
	"text/tabwriter"

	"github.com/kelseyhightower/envconfig"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/internal/dbsession"
	"github.com/brp/levering/internal/setting"
)

// A command's environment is declared in two forms, each setting once. The settings a command
// owns (Common, Operate and its own) are fields of a struct with envconfig tags: the variable,
// its default and its bound. The settings a package owns are Vars: each binds a variable to
// the field of the package's Config it sets, so that the package keeps the default (a field
// left zero) and the rules of its values (its Validate, named back by Explain). Load, writeUsage,
// Explain and Unbounded read both forms.

// Var is an environment variable that sets a field of a package's Config.
type Var struct {
	// Name is the variable's name.
	Name string
	// Value is the field it sets, as a pointer to one of this package's types, which says
	// how its text is read: (*setup.Millis)(&cfg.Delay). Unset, the field keeps its value.
	// Its bounds are the package's (its Config's Validate, named back by Explain).
	Value Decoder
}

// Decoder reads a variable's text into the value it points to; its error says what is
// expected (Load adds the variable and the value). Every type of this package is one.
type Decoder interface{ Decode(string) error }

// Text is a string taken as it is.
type Text string

// Decode implements envconfig.Decoder.
func (t *Text) Decode(v string) error { *t = Text(v); return nil }

// BrokerVars are the variables that set b's HeartBeat and OpTimeout, whose defaults package
// broker owns.
func BrokerVars(b *broker.Config) []Var {
	return []Var{
		{"BRP_STOMP_HEARTBEAT", (*heartBeat)(&b.HeartBeat)},
		{"BRP_STOMP_TIMEOUT", (*Duration)(&b.OpTimeout)},
	}
}

// variable is one variable of either form, as Load, writeUsage and the bounds see it.
type variable struct {
	name, def, max string
	hasDef, hasMax bool
	isVar          bool          // a Var: its bound is its package's
	v              reflect.Value // the value, settable; a nil pointer for an unset optional field
}

// settings lists the variables of tagged (a pointer to a struct with envconfig tags, embedded
// structs walked) and then vars.
func settings(tagged any, vars []Var) []variable {
	var out []variable
	if tagged != nil {
		var walk func(v reflect.Value)
		walk = func(v reflect.Value) {
			for i := range v.NumField() {
				f, fv := v.Type().Field(i), v.Field(i)
				if f.Anonymous && fv.Kind() == reflect.Struct {
					walk(fv)
					continue
				}
				if name := f.Tag.Get("envconfig"); name != "" {
					s := variable{name: name, v: fv}
					s.def, s.hasDef = f.Tag.Lookup("default")
					s.max, s.hasMax = f.Tag.Lookup("max")
					out = append(out, s)
				}
			}
		}
		walk(reflect.ValueOf(tagged).Elem())
	}
	for _, v := range vars {
		out = append(out, variable{name: v.Name, v: reflect.ValueOf(v.Value).Elem(), isVar: true,
			def: fmt.Sprint(reflect.ValueOf(v.Value).Elem().Interface()), hasDef: true})
	}
	return out
}

// Load fills tagged (a pointer to a struct with envconfig tags holding the full variable
// names; nil for none) and the fields vars point to from the environment. The error names the
// variable, the value and what is expected.
func Load(tagged any, vars ...Var) error {
	if tagged != nil {
		err := envconfig.Process("", tagged)
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			return fmt.Errorf("%w: %s=%q: %v", ErrConfig, pe.KeyName, dbsession.Redact(pe.Value), pe.Err)
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	for _, v := range vars {
		if s, ok := os.LookupEnv(v.Name); ok {
			if err := v.Value.Decode(s); err != nil {
				return fmt.Errorf("%w: %s=%q: %v", ErrConfig, v.Name, dbsession.Redact(s), err)
			}
		}
	}
	if err := checkBounds(settings(tagged, vars)); err != nil {
		return err
	}
	if s, ok := tagged.(interface{ readSecrets() error }); ok {
		return s.readSecrets()
	}
	return nil
}

// writeUsage writes what a command's --help says: its usage line, then every variable with its
// default: a tagged field's from its tag, a Var's the value its field holds (give writeUsage vars
// bound to a Config holding the package's defaults).
func writeUsage(w io.Writer, usage string, tagged any, vars ...Var) error {
	fmt.Fprintf(w, "%s\n\nSettings (environment variables; docs/operations.md, Configuration, says what each means):\n\n", usage)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range settings(tagged, vars) {
		fmt.Fprintf(tw, "  %s\t%s\n", s.name, s.def)
	}
	return tw.Flush()
}

// Explain turns a package's *setting.Error about a field of conf (a pointer to the package's
// Config; a dotted field, "Broker.HeartBeat", for a Config it holds) into an ErrConfig naming
// the variable of vars that sets that field. Other errors pass unchanged.
func Explain(err error, conf any, vars ...Var) error {
	var se *setting.Error
	if !errors.As(err, &se) {
		return err
	}
	f := reflect.ValueOf(conf).Elem()
	for _, name := range strings.Split(se.Field, ".") {
		if f.Kind() != reflect.Struct {
			return err
		}
		if f = f.FieldByName(name); !f.IsValid() {
			return err
		}
	}
	for _, v := range vars {
		if reflect.ValueOf(v.Value).Pointer() == f.Addr().Pointer() {
			return fmt.Errorf("%w: %s=%q: %s", ErrConfig, v.Name, dbsession.Redact(os.Getenv(v.Name)), se.Expected)
		}
	}
	return err
}

// Unbounded names the numeric settings that have no bound: a command's own (tagged) ones
// without a max tag, and the Vars whose package's validate (a Config's Validate after the
// Vars were bound to that Config) accepts a value no setting should have: every count and
// duration must be bounded (one past any sensible value fails later, or never works).
func Unbounded(tagged any, validate func() error, vars ...Var) []string {
	var out []string
	for _, s := range settings(tagged, vars) {
		if !numeric(s.v.Type()) {
			continue
		}
		if !s.isVar {
			if !s.hasMax {
				out = append(out, s.name)
			}
			continue
		}
		v := s.v
		old := reflect.ValueOf(v.Interface())
		if v.CanFloat() {
			v.SetFloat(math.MaxFloat32)
		} else {
			v.SetInt(math.MaxInt64 / 2)
		}
		if validate() == nil {
			out = append(out, s.name)
		}
		v.Set(old)
	}
	return out
}
