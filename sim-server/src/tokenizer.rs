//! The simulated tokenizer: one token per whitespace-separated word, plus a fixed
//! chat-template overhead. `/tokenize`, the context check and `usage` all use it, so
//! a client that builds prompts with `count_tokens` hits exact lengths.

use serde_json::Value;

/// Template tokens added per chat message (`<|im_start|>`, role, newline).
pub const CHAT_TOKENS_PER_MESSAGE: u64 = 3;
/// Template tokens added once per chat prompt (the assistant turn's header).
pub const CHAT_TOKENS_PER_PROMPT: u64 = 3;

const IM_START: u32 = 151_644;
const NEWLINE: u32 = 198;
const ASSISTANT: u32 = 77_091;
const VOCAB_WORDS: u32 = 150_000;

/// Number of tokens in `text`: its whitespace-separated words.
pub fn count_tokens(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// Token id of one word: a stable hash into the vocabulary.
fn word_id(word: &str) -> u32 {
    // FNV-1a: stable across runs and platforms.
    let mut h: u32 = 0x811c_9dc5;
    for b in word.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h % VOCAB_WORDS
}

pub fn encode_text(text: &str, out: &mut Vec<u32>) {
    out.extend(text.split_whitespace().map(word_id));
}

fn role_id(role: &str) -> u32 {
    match role {
        "system" => 8_948,
        "user" => 872,
        "assistant" => ASSISTANT,
        other => word_id(other),
    }
}

/// Text of a chat message's `content`: a string, or an array of parts whose text
/// parts are joined. None when the shape is not one a server accepts.
pub fn message_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Null => Some(String::new()),
        Value::Array(parts) => {
            let mut text = String::new();
            for part in parts {
                match part.get("text").and_then(Value::as_str) {
                    Some(t) => {
                        text.push(' ');
                        text.push_str(t);
                    }
                    None if part.get("type").is_some() => {}
                    None => return None,
                }
            }
            Some(text)
        }
        _ => None,
    }
}

/// A prompt or a conversation that cannot be tokenized: the message of the
/// 400 the server answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    #[error("'messages' must be a list of messages")]
    NotAList,
    #[error("messages[{index}]: missing 'role'")]
    NoRole { index: usize },
    #[error("messages[{index}]: 'content' must be a string or a list of parts")]
    BadContent { index: usize },
    #[error("'prompt' token ids must be integers")]
    NotTokenIds,
    #[error("the simulated server takes one prompt per request")]
    Batch,
    #[error("'prompt' must be a string or a list of token ids")]
    NotAPrompt,
}

/// Token ids of a chat conversation, template included. Err names what is wrong.
pub fn encode_chat(messages: &Value) -> Result<Vec<u32>, PromptError> {
    let list = messages.as_array().ok_or(PromptError::NotAList)?;
    let mut ids = Vec::new();
    for (i, m) in list.iter().enumerate() {
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or(PromptError::NoRole { index: i })?;
        let text = message_text(m.get("content").unwrap_or(&Value::Null))
            .ok_or(PromptError::BadContent { index: i })?;
        ids.extend([IM_START, role_id(role), NEWLINE]);
        encode_text(&text, &mut ids);
    }
    ids.extend([IM_START, ASSISTANT, NEWLINE]);
    Ok(ids)
}

/// Token ids of a completions `prompt`: a string, a list of token ids, or a list
/// holding one string or one list of ids. Batches of several prompts are refused.
pub fn encode_prompt(prompt: &Value) -> Result<Vec<u32>, PromptError> {
    fn ids_of(list: &[Value]) -> Option<Vec<u32>> {
        list.iter()
            .map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok()))
            .collect()
    }
    match prompt {
        Value::String(s) => {
            let mut ids = Vec::new();
            encode_text(s, &mut ids);
            Ok(ids)
        }
        Value::Array(list) if list.iter().all(Value::is_number) => {
            ids_of(list).ok_or(PromptError::NotTokenIds)
        }
        Value::Array(list) if list.len() == 1 => encode_prompt(&list[0]),
        Value::Array(_) => Err(PromptError::Batch),
        _ => Err(PromptError::NotAPrompt),
    }
}

/// Words the simulated model writes, cycled: plausible code tokens.
const OUTPUT_WORDS: [&str; 48] = [
    "fn",
    "parse_config",
    "(",
    "path:",
    "&Path",
    ")",
    "->",
    "Result<Config>",
    "{",
    "let",
    "text",
    "=",
    "fs::read_to_string(path)?;",
    "let",
    "mut",
    "config:",
    "Config",
    "=",
    "toml::from_str(&text)?;",
    "for",
    "entry",
    "in",
    "config.entries.iter_mut()",
    "{",
    "entry.name",
    "=",
    "entry.name.trim().to_string();",
    "if",
    "entry.weight",
    "<",
    "0.0",
    "{",
    "return",
    "Err(Error::Negative(entry.name.clone()));",
    "}",
    "}",
    "config.validate()?;",
    "Ok(config)",
    "}",
    "#[test]",
    "fn",
    "parses_sample()",
    "{",
    "assert!(parse_config(SAMPLE).is_ok());",
    "}",
    "//",
    "TODO:",
    "more",
];

/// The text of output token `index` of a request whose words start at `offset`:
/// one word with a leading space, so `count_tokens` of the output is its length.
pub fn output_token(offset: u64, index: u64) -> &'static str {
    let i = (offset.wrapping_add(index) % OUTPUT_WORDS.len() as u64) as usize;
    OUTPUT_WORDS[i]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_words() {
        assert_eq!(count_tokens(""), 0);
        assert_eq!(count_tokens("  hello   world \n again\t"), 3);
    }

    #[test]
    fn chat_adds_template_overhead() {
        let ids = encode_chat(&json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "one two three"}]}
        ]))
        .unwrap();
        assert_eq!(
            ids.len() as u64,
            2 + 3 + 2 * CHAT_TOKENS_PER_MESSAGE + CHAT_TOKENS_PER_PROMPT
        );
        assert!(encode_chat(&json!({"role": "user"})).is_err());
        assert!(encode_chat(&json!([{"content": "x"}])).is_err());
    }

    #[test]
    fn prompt_shapes() {
        assert_eq!(encode_prompt(&json!("a b c")).unwrap().len(), 3);
        assert_eq!(
            encode_prompt(&json!([1, 2, 3, 4])).unwrap(),
            vec![1, 2, 3, 4]
        );
        assert_eq!(encode_prompt(&json!(["a b"])).unwrap().len(), 2);
        assert!(encode_prompt(&json!(["a", "b"])).is_err());
        assert!(encode_prompt(&json!(7)).is_err());
        assert!(encode_prompt(&json!([-1])).is_err());
    }

    #[test]
    fn output_words_are_single_tokens() {
        for w in OUTPUT_WORDS {
            assert_eq!(count_tokens(w), 1, "{w:?}");
        }
    }
}
