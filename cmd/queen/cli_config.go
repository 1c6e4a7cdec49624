package main

import (
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/queen-mq/queen/crypto/secret"
)

// setting is one row of `queen config`.
type setting struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Default string `json:"default"`
	Set     bool   `json:"set"`
	Secret  bool   `json:"secret"`
	Doc     string `json:"doc"`
}

// readSettings runs readConfig over an environment and returns what it
// read: every variable, in the order read, with the default the code gave
// it there (a default taken from another setting follows that setting);
// and the error a boot with that environment would stop on.
func readSettings(lookup func(string) string) ([]readVar, error) {
	e := &env{get: lookup}
	_, err := readConfig(e)
	return e.read, err
}

// describeSettings is the settings with their values in this environment,
// secrets masked fully: neither characters nor length; and the error a
// boot with it would stop on.
func describeSettings(lookup func(string) string) ([]setting, error) {
	read, err := readSettings(lookup)
	var out []setting
	for _, r := range read {
		d := settingDocs[r.Name]
		s := setting{Name: r.Name, Default: r.Default, Secret: d.secret, Doc: d.doc}
		raw := lookup(r.Name)
		s.Set = strings.TrimSpace(raw) != ""
		s.Value = s.Default
		if s.Set {
			s.Value = raw
		}
		switch {
		case s.Secret:
			s.Value, s.Default = secret.Mask(s.Value), secret.Mask(s.Default)
		case d.mask != nil:
			s.Value, s.Default = maskSet(d.mask, s.Value), maskSet(d.mask, s.Default)
		}
		out = append(out, s)
	}
	return out, err
}

// maskSet masks a value that is set, and leaves "" alone.
func maskSet(mask func(string) string, v string) string {
	if v == "" {
		return v
	}
	return mask(v)
}

func newConfigCommand() *cobra.Command {
	var asJSON, changed bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print every setting: environment variable, value, default and what it does",
		Long: `Print every environment variable a node reads, its value in this environment
(secrets shown only as <set> or <unset>), its default and one line of doc, then
check the whole configuration as 'queen serve' would: exit 2 if it would refuse
to start, with the reason. Nothing is opened or started.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			all, cerr := describeSettings(os.Getenv)
			var shown []setting
			for _, s := range all {
				if s.Set || !changed {
					shown = append(shown, s)
				}
			}
			err := printValue(cmd.OutOrStdout(), asJSON, shown, func(w io.Writer) {
				row(w, "VARIABLE", "VALUE", "DEFAULT", "DESCRIPTION")
				for _, s := range shown {
					v := s.Value
					if !s.Set && !s.Secret {
						v = "(default)"
					}
					row(w, s.Name, oneLine(v), oneLine(s.Default), s.Doc)
				}
			})
			if err != nil {
				return err
			}
			if cerr != nil {
				return &cliError{code: exitRefused, msg: "the node would refuse this configuration: " + cerr.Error()}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&changed, "changed", false, "only the variables set in this environment")
	return cmd
}

// oneLine keeps a table row on one line.
func oneLine(s string) string { return strings.NewReplacer("\n", `\n`, "\t", " ").Replace(s) }
