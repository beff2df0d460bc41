package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"burrow/config"
	"burrow/runtime"
)

func init() { rootCmd.AddCommand(newDHTCmd()) }

func newDHTCmd() *cobra.Command {
	var socket string
	var asJSON bool
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "dht",
		Short: "Read and write the network's DHT records in the running node's name",
		Long: `Read and write records of the network's DHT (where DHCP leases, DNS names,
container subnets and the ARP directory live), through the node running on
this machine and in its name.

Every record is signed by the member that wrote it, with its node key, and
checked by the nodes that store it and the nodes that read it: only its
owner can change or delete it, and a member can hold at most its share of
the records. An answer "denied" names the owner; "unproven" means a
signature failed (or members' clocks are more than a minute apart);
"over-quota" means this node holds as many records as one member may.

DHCP leases are under dhcp:NETWORK:IP, names under dns:DOMAIN:NAME,
container subnets under subnet:PREFIX, the ARP directory under arp:IP.`,
		Example: `  burrow dht get dns:burrow.test:laptop
  burrow dht put note:backup-window "02:00-04:00" --ttl 24h
  burrow dht delete note:backup-window`,
	}
	run := func(w io.Writer, req runtime.DHTRequest) error {
		resp, err := runtime.Query(socket, runtime.Request{Command: "dht", DHT: &req})
		if err != nil {
			return err
		}
		return printDHTAnswer(w, req, resp.DHT, asJSON)
	}
	get := &cobra.Command{
		Use:   "get KEY",
		Short: "Show a record: its value, owner and when its lease ends",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.OutOrStdout(), runtime.DHTRequest{Op: "get", Key: args[0]})
		},
	}
	put := &cobra.Command{
		Use:   "put KEY VALUE",
		Short: "Write a record this node owns, or create one no one holds",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ttl <= 0 {
				return fmt.Errorf("--ttl must be positive, e.g. --ttl 1h (got %v)", ttl)
			}
			return run(cmd.OutOrStdout(), runtime.DHTRequest{Op: "put", Key: args[0], Value: []byte(args[1]), TTL: ttl})
		},
	}
	put.Flags().DurationVar(&ttl, "ttl", time.Hour, "lease of the record: it is gone after this unless written again")
	del := &cobra.Command{
		Use:   "delete KEY",
		Short: "Delete a record this node owns",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.OutOrStdout(), runtime.DHTRequest{Op: "delete", Key: args[0]})
		},
	}
	cmd.AddCommand(get, put, del)
	cmd.PersistentFlags().StringVar(&socket, "socket", config.DefaultControlSocket, "control socket of the node")
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	return cmd
}

// printDHTAnswer prints the answer; any status but ok is an error, named
// so that the user knows what happened.
func printDHTAnswer(w io.Writer, req runtime.DHTRequest, a *runtime.DHTAnswer, asJSON bool) error {
	if a == nil {
		return errors.New("the node sent no answer")
	}
	if asJSON {
		if err := json.NewEncoder(w).Encode(a); err != nil {
			return err
		}
	}
	switch a.Status {
	case "ok":
		if asJSON {
			return nil
		}
		if req.Op == "delete" {
			fmt.Fprintf(w, "deleted %s\n", req.Key)
			return nil
		}
		fmt.Fprintf(w, "key      %s\nvalue    %s\nowner    %s\nexpires  %s (in %s)\n", req.Key, printable(a.Value), a.Owner,
			a.Expires.Format(time.RFC3339), time.Until(a.Expires).Round(time.Second))
		return nil
	case "not-found":
		return fmt.Errorf("%s: no such record", req.Key)
	case "denied":
		return fmt.Errorf("%s: refused: the record belongs to node %s, and only its owner can change or delete it", req.Key, a.Owner)
	case "unproven":
		return fmt.Errorf("%s: refused: a signature did not check out (a forged answer on the way, or members' clocks more than a minute apart)", req.Key)
	case "over-quota":
		return fmt.Errorf("%s: refused: this node holds as many DHT records as one member may", req.Key)
	case "timeout":
		return fmt.Errorf("%s: the DHT did not answer in time; the write may or may not have happened", req.Key)
	}
	return fmt.Errorf("%s: %s", req.Key, a.Status)
}

// printable shows text as it is and anything else quoted with escapes.
func printable(v []byte) string {
	if utf8.Valid(v) {
		s := string(v)
		if q := strconv.Quote(s); q[1:len(q)-1] == s {
			return s
		}
	}
	return strconv.Quote(string(v))
}
