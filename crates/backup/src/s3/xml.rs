//! The little of S3's XML the client reads: one element's text.

/// The text of the first `<name>` element in `xml`, unescaped.
pub fn element(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&close)?;
    Some(unescape(&xml[start..end]))
}

/// Escapes text for an element's content.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_element_is_found_and_unescaped() {
        let xml = r#"<?xml version="1.0"?><Error><Code>NoSuchBucket</Code><Message>The specified bucket &quot;x&quot; does not exist</Message></Error>"#;
        assert_eq!(element(xml, "Code").as_deref(), Some("NoSuchBucket"));
        assert_eq!(
            element(xml, "Message").as_deref(),
            Some(r#"The specified bucket "x" does not exist"#)
        );
        assert_eq!(element(xml, "UploadId"), None);
    }

    #[test]
    fn escaping_round_trips() {
        let text = r#"a&b<c>"d""#;
        assert_eq!(unescape(&escape(text)), text);
    }
}
