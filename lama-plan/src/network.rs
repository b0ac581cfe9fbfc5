//! The network between nodes: Slurm's `topology.conf` for `topology/tree`.
//!
//! ```text
//! SwitchName=s1 Nodes=node[1-22]
//! SwitchName=s2 Nodes=node[23-44]
//! SwitchName=top Switches=s[1-2]
//! ```
//!
//! Each line defines one switch by `SwitchName=`, with the nodes (`Nodes=`) or switches
//! (`Switches=`) below it, as Slurm hostlists; other keys (`LinkSpeed=`) are ignored, `#`
//! starts a comment, keys are case-insensitive. Without a file every node hangs off one switch.

use crate::hostlist;
use std::collections::HashMap;

/// A switch tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    /// Switch names.
    names: Vec<String>,
    /// The parent switch of each switch.
    parent: Vec<Option<usize>>,
    /// The leaf switch of each node.
    node_switch: HashMap<String, usize>,
}

/// A `topology.conf` that cannot be used: the line and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct NetworkError {
    /// The line (1-based; 0 for the whole file).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl Network {
    /// Every node under one switch.
    pub fn single_switch(nodes: &[String]) -> Network {
        Network {
            names: vec!["(one switch)".to_string()],
            parent: vec![None],
            node_switch: nodes.iter().map(|n| (n.clone(), 0)).collect(),
        }
    }

    /// Parses a `topology.conf`.
    pub fn parse(text: &str) -> Result<Network, NetworkError> {
        let err = |line: usize, message: String| NetworkError { line, message };
        let mut names: Vec<String> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut below: Vec<(usize, usize, Vec<String>)> = Vec::new(); // (line, switch, children)
        let mut node_switch: HashMap<String, usize> = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let mut name = None;
            let mut nodes = None;
            let mut switches = None;
            for pair in content.split_whitespace() {
                let (k, v) = pair.split_once('=').ok_or_else(|| {
                    err(
                        line,
                        format!("'{pair}' is not Key=Value (SwitchName=, Nodes=, Switches=)"),
                    )
                })?;
                match k.to_ascii_lowercase().as_str() {
                    "switchname" => name = Some(v.to_string()),
                    "nodes" => nodes = Some(v.to_string()),
                    "switches" => switches = Some(v.to_string()),
                    _ => {}
                }
            }
            let name = name.ok_or_else(|| {
                err(
                    line,
                    "a line without SwitchName= (each line defines one switch)".to_string(),
                )
            })?;
            if index.contains_key(&name) {
                return Err(err(line, format!("switch {name} is defined twice")));
            }
            let id = names.len();
            index.insert(name.clone(), id);
            names.push(name.clone());
            if let Some(list) = nodes {
                for n in hostlist::expand(&list).map_err(|e| err(line, e))? {
                    if let Some(&other) = node_switch.get(&n) {
                        return Err(err(
                            line,
                            format!("node {n} is under both {} and {name}", names[other]),
                        ));
                    }
                    node_switch.insert(n, id);
                }
            }
            if let Some(list) = switches {
                below.push((line, id, hostlist::expand(&list).map_err(|e| err(line, e))?));
            }
        }
        if names.is_empty() {
            return Err(err(
                0,
                "no switch is defined (expected SwitchName= lines)".to_string(),
            ));
        }
        let mut parent = vec![None; names.len()];
        for (line, id, children) in below {
            for c in children {
                let &child = index
                    .get(&c)
                    .ok_or_else(|| err(line, format!("switch {c} is not defined")))?;
                if parent[child].is_some() {
                    return Err(err(line, format!("switch {c} has two parents")));
                }
                parent[child] = Some(id);
            }
        }
        // No cycles: every switch reaches a root within as many steps as there are switches.
        for s in 0..names.len() {
            let mut at = s;
            for _ in 0..=names.len() {
                match parent[at] {
                    Some(p) => at = p,
                    None => break,
                }
            }
            if parent[at].is_some() {
                return Err(err(0, format!("switch {} is in a cycle", names[s])));
            }
        }
        Ok(Network {
            names,
            parent,
            node_switch,
        })
    }

    /// The switches from the node's leaf switch up to its root, or `None` for a node the
    /// network does not name.
    pub fn path(&self, node: &str) -> Option<Vec<usize>> {
        let mut at = *self.node_switch.get(node)?;
        let mut path = vec![at];
        while let Some(p) = self.parent[at] {
            path.push(p);
            at = p;
        }
        Some(path)
    }

    /// A switch's name.
    pub fn name(&self, switch: usize) -> &str {
        &self.names[switch]
    }

    /// A fat tree for examples and benchmarks: `switches` leaf switches of `per_switch` nodes
    /// named `n1`, `n2`, ..., under one top switch when there are several leaves. Returns the
    /// node names in order and the network, written as a `topology.conf` and parsed.
    pub fn fat_tree(switches: usize, per_switch: usize) -> (Vec<String>, Network) {
        let names: Vec<String> = (1..=switches * per_switch)
            .map(|i| format!("n{i}"))
            .collect();
        let mut conf = String::new();
        for s in 0..switches {
            conf += &format!(
                "SwitchName=leaf{s} Nodes=n[{}-{}]\n",
                s * per_switch + 1,
                (s + 1) * per_switch
            );
        }
        if switches > 1 {
            conf += &format!("SwitchName=top Switches=leaf[0-{}]\n", switches - 1);
        }
        let network = Network::parse(&conf).unwrap_or_else(|_| Network::single_switch(&names));
        (names, network)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_two_level_tree() {
        let net = Network::parse(
            "# fat tree\nSwitchName=s1 Nodes=node[1-2] LinkSpeed=100\nswitchname=s2 nodes=node3\n\
             SwitchName=top Switches=s[1-2]\n",
        )
        .unwrap();
        let name = |p: Vec<usize>| {
            p.iter()
                .map(|&s| net.name(s).to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(name(net.path("node2").unwrap()), ["s1", "top"]);
        assert_eq!(name(net.path("node3").unwrap()), ["s2", "top"]);
        assert_eq!(net.path("node9"), None);
        let (names, tree) = Network::fat_tree(2, 3);
        assert_eq!(names.len(), 6);
        let path: Vec<&str> = tree
            .path("n4")
            .unwrap()
            .iter()
            .map(|&s| tree.name(s))
            .collect();
        assert_eq!(path, ["leaf1", "top"]);
        let one = Network::single_switch(&["a".to_string()]);
        assert_eq!(one.path("a"), Some(vec![0]));
    }

    #[test]
    fn errors_name_the_line() {
        for (text, line, why) in [
            ("", 0, "no switch"),
            ("Nodes=a\n", 1, "without SwitchName"),
            ("SwitchName=a Nodes\n", 1, "not Key=Value"),
            ("SwitchName=a\nSwitchName=a\n", 2, "defined twice"),
            ("SwitchName=a Switches=b\n", 1, "switch b is not defined"),
            ("SwitchName=a Nodes=n[1-\n", 1, "invalid node list"),
            (
                "SwitchName=a Nodes=n1\nSwitchName=b Nodes=n1\n",
                2,
                "under both a and b",
            ),
            (
                "SwitchName=a Switches=b\nSwitchName=b Switches=a\n",
                0,
                "in a cycle",
            ),
        ] {
            let e = Network::parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.message.contains(why), "{text:?}: {e}");
        }
    }
}
