package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func clientFilesCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "files", Short: "Browse a site's files", Args: cobra.NoArgs}
	cmd.AddCommand(filesLsCmd(o))
	return cmd
}

// clientFile is what the client shows of a file browser entry.
type clientFile struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Type   string `json:"type"`
	Size   int64  `json:"size"`
	Mtime  string `json:"mtime"`
	Status string `json:"status"`
}

func filesLsCmd(o *clientOptions) *cobra.Command {
	var site string
	var page, limit int
	cmd := &cobra.Command{
		Use:   "ls --site S [PATH]",
		Short: "List a folder of a site (default /), a page at a time",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if site == "" {
				return fmt.Errorf("--site is required")
			}
			if err := checkLimit(limit); err != nil {
				return err
			}
			if page < 1 {
				return fmt.Errorf("--page %d: pages count from 1", page)
			}
			p := "/"
			if len(args) == 1 {
				p = args[0]
			}
			c, err := newAPIClient(o, true)
			if err != nil {
				return err
			}
			q := url.Values{"site": {site}, "path": {p}, "page": {strconv.Itoa(page)}, "page_size": {strconv.Itoa(limit)}}
			var out struct {
				Count   int64             `json:"count"`
				Path    string            `json:"path"`
				Results []json.RawMessage `json:"results"`
			}
			if err := c.do(cmd.Context(), http.MethodGet, "/api/file/?"+q.Encode(), nil, &out); err != nil {
				return err
			}
			if o.JSON {
				return printJSON(cmd.OutOrStdout(), out)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTYPE\tSIZE\tMODIFIED\tSTATUS")
			for _, raw := range out.Results {
				var f clientFile
				if err := json.Unmarshal(raw, &f); err != nil {
					return err
				}
				name := f.Name
				if f.Type == "directory" {
					name += "/"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", name, f.Type, f.Size, shortTime(f.Mtime), f.Status)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if shown := int64((page-1)*limit + len(out.Results)); shown < out.Count {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d entries: --page %d for more.\n", shown, out.Count, page+1)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "the site to browse")
	cmd.Flags().IntVar(&page, "page", 1, "page of the listing")
	cmd.Flags().IntVar(&limit, "limit", 100, "entries per page, 20 to 100")
	return cmd
}
