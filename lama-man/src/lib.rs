//! Manual pages in roff (man(7)): the `lama` command's page and the plugin's are generated
//! from the same tables as their help text, so that the two cannot drift apart.
#![deny(missing_docs)]

/// A manual page being written.
#[derive(Debug, Clone)]
pub struct Page {
    text: String,
}

/// `text` made safe for roff: backslashes and hyphens escaped, and a line that would start
/// with a control character (`.` or `'`) guarded.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for line in text.split('\n') {
        if !out.is_empty() {
            out.push('\n');
        }
        if line.starts_with('.') || line.starts_with('\'') {
            out.push_str("\\&");
        }
        for c in line.chars() {
            match c {
                '\\' => out.push_str("\\e"),
                '-' => out.push_str("\\-"),
                c => out.push(c),
            }
        }
    }
    out
}

impl Page {
    /// A page `name(section)`; `source` and `manual` fill the footer and header (no date, so
    /// that the page is the same on every build).
    pub fn new(name: &str, section: u8, source: &str, manual: &str) -> Page {
        Page {
            text: format!(
                ".TH \"{}\" \"{section}\" \"\" \"{}\" \"{}\"\n",
                escape(&name.to_uppercase()),
                escape(source),
                escape(manual)
            ),
        }
    }

    /// A section heading (`.SH`).
    pub fn section(&mut self, title: &str) -> &mut Page {
        self.text += &format!(".SH \"{}\"\n", escape(&title.to_uppercase()));
        self
    }

    /// A subsection heading (`.SS`).
    pub fn subsection(&mut self, title: &str) -> &mut Page {
        self.text += &format!(".SS \"{}\"\n", escape(title));
        self
    }

    /// A paragraph of running text.
    pub fn paragraph(&mut self, text: &str) -> &mut Page {
        self.text += ".PP\n";
        self.text += &escape(text.trim());
        self.text.push('\n');
        self
    }

    /// A tagged item (`.TP`): `tag` in bold, then `arg` in italics (joined to a tag that ends
    /// in `=`), then the text.
    pub fn item(&mut self, tag: &str, arg: Option<&str>, text: &str) -> &mut Page {
        self.text += ".TP\n";
        self.text += &format!("\\fB{}\\fR", escape(tag));
        if let Some(arg) = arg {
            // --option=VALUE stays one word.
            let space = if tag.ends_with('=') { "" } else { " " };
            self.text += &format!("{space}\\fI{}\\fR", escape(arg));
        }
        self.text.push('\n');
        self.text += &escape(text.trim());
        self.text.push('\n');
        self
    }

    /// Lines shown as they are (commands, files), indented.
    pub fn literal(&mut self, lines: &str) -> &mut Page {
        self.text += ".PP\n.RS 4\n.nf\n";
        self.text += &escape(lines.trim_end());
        self.text += "\n.fi\n.RE\n";
        self
    }

    /// The page's text.
    pub fn finish(&self) -> String {
        self.text.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_roff_would_read_as_markup() {
        assert_eq!(escape("--lama-map=a\\b"), "\\-\\-lama\\-map=a\\eb");
        assert_eq!(
            escape(".hidden\n'quoted\nplain"),
            "\\&.hidden\n\\&'quoted\nplain"
        );
    }

    #[test]
    fn a_page_with_every_element() {
        let mut p = Page::new("lama", 1, "spank-lama 0.1.0", "User Commands");
        p.section("name")
            .paragraph("lama - preview")
            .subsection("map")
            .item("--np", Some("NP"), "Number of processes.")
            .literal("lama map -n 2\n");
        assert_eq!(
            p.finish(),
            ".TH \"LAMA\" \"1\" \"\" \"spank\\-lama 0.1.0\" \"User Commands\"\n\
             .SH \"NAME\"\n.PP\nlama \\- preview\n.SS \"map\"\n\
             .TP\n\\fB\\-\\-np\\fR \\fINP\\fR\nNumber of processes.\n\
             .PP\n.RS 4\n.nf\nlama map \\-n 2\n.fi\n.RE\n"
        );
    }
}
