package endpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/felixmq/felix/internal/devdir"
)

// Context is a named set of connection defaults (`felix context save`).
// Empty fields leave the setting to the dev directory or the default.
type Context struct {
	Addr         string `json:"addr,omitempty"`
	Admin        string `json:"admin,omitempty"`
	ControlPlane string `json:"controlplane,omitempty"`
	CA           string `json:"ca,omitempty"`
	TokenFile    string `json:"token_file,omitempty"`
	Tenant       string `json:"tenant,omitempty"`
}

// Store is the directory of saved contexts.
type Store struct {
	Dir string // holds contexts/NAME.json and "context"
}

// StoreFor is the store in $XDG_CONFIG_HOME/felix, else
// $HOME/.config/felix ("" when neither is set: nothing is saved).
func StoreFor(lookup devdir.Lookup) Store {
	if d, ok := lookup("XDG_CONFIG_HOME"); ok && d != "" {
		return Store{Dir: filepath.Join(d, "felix")}
	}
	if h, ok := lookup("HOME"); ok && h != "" {
		return Store{Dir: filepath.Join(h, ".config", "felix")}
	}
	return Store{}
}

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckName refuses a name that could not be a file name of its own.
func CheckName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("context name %q: want letters, digits, '.', '_' or '-' (at most 64, not starting with a punctuation mark)", name)
	}
	return nil
}

func (s Store) path(name string) string { return filepath.Join(s.Dir, "contexts", name+".json") }

func (s Store) ok() error {
	if s.Dir == "" {
		return errors.New("endpoint: no configuration directory (set HOME or XDG_CONFIG_HOME)")
	}
	return nil
}

// Save writes the context name, replacing one of that name.
func (s Store) Save(name string, c Context) error {
	if err := s.ok(); err != nil {
		return err
	}
	if err := CheckName(name); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path(name)), 0o700); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(s.path(name), append(raw, '\n'), 0o600)
}

// Load reads the context name; ErrNoContext when it is not saved.
func (s Store) Load(name string) (Context, error) {
	if err := CheckName(name); err != nil {
		return Context{}, err
	}
	raw, err := os.ReadFile(s.path(name))
	if errors.Is(err, fs.ErrNotExist) || s.Dir == "" {
		return Context{}, fmt.Errorf("%w (felix context list shows the saved ones)", ErrNoContext)
	}
	if err != nil {
		return Context{}, err
	}
	var c Context
	if err := json.Unmarshal(raw, &c); err != nil {
		return Context{}, fmt.Errorf("%s: %w", s.path(name), err)
	}
	return c, nil
}

// List names the saved contexts, sorted.
func (s Store) List() ([]string, error) {
	if s.Dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(filepath.Join(s.Dir, "contexts"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok && CheckName(name) == nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, err
}

// Remove deletes the context name, and unselects it if it was selected.
func (s Store) Remove(name string) error {
	if _, err := s.Load(name); err != nil {
		return err
	}
	if s.Selected() == name {
		if err := s.Select(""); err != nil {
			return err
		}
	}
	return os.Remove(s.path(name))
}

// Selected is the context `felix context use` selected, "" for none.
func (s Store) Selected() string {
	if s.Dir == "" {
		return ""
	}
	raw, err := os.ReadFile(filepath.Join(s.Dir, "context"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}

// Select makes name the context in effect ("" for none); it must be saved.
func (s Store) Select(name string) error {
	if err := s.ok(); err != nil {
		return err
	}
	if name == "" {
		err := os.Remove(filepath.Join(s.Dir, "context"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if _, err := s.Load(name); err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.Dir, "context"), []byte(name+"\n"), 0o600)
}
