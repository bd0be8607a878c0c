#pragma once
// Published parameter counts (the models' Hugging Face model cards and papers), the reference every
// bundled model must reproduce, from the model builder and through `prefetchlab describe`.
#include <cstdint>
#include <map>
#include <string>

namespace prefetchlab::testing {

inline const std::map<std::string, std::int64_t> kPublishedTotals = {
    {"gpt2-small", 124'439'808},
    {"gpt2-medium", 354'823'168},
    {"gpt2-medium-fused-gelu", 354'823'168},  // gpt2-medium's weights; only its GELU kernel differs
    {"gpt2-large", 774'030'080},
    {"gpt2-xl", 1'557'611'200},
    {"bert-base", 109'482'240},
    {"bert-large", 335'141'888},
    // BertModel without pooler (h*h + h) plus qa_outputs Linear(h, 2) (2h + 2).
    {"bert-base-qa", 109'482'240 - (768 * 768 + 768) + (2 * 768 + 2)},
    {"bert-large-qa", 335'141'888 - (1024 * 1024 + 1024) + (2 * 1024 + 2)},
    {"llama-2-7b", 6'738'415'616},
    {"llama-2-13b", 13'015'864'320},
    {"llama-2-70b", 68'976'648'192},
    {"llama-3-8b", 8'030'261'248},
    {"llama-3-70b", 70'553'706'496},
    // 2 * (q 256*256 + k,v 2*256*128 + o 256*256 + 3 * 256*688 + 2 * 256) + 2 * 4096*256 + 256
    {"tiny-llama", 2 * (65'536 + 65'536 + 65'536 + 3 * 176'128 + 512) + 2 * 1'048'576 + 256},
};

// The published totals, each from the model card's safetensors parameter count on huggingface.co
// (the "Model size" / safetensors metadata of the repository named).
inline const std::map<std::string, std::int64_t> kPublishedHfTotals = {
    {"mistral-7b-v0.1", 7'241'732'096},         // mistralai/Mistral-7B-v0.1
    {"mixtral-8x7b-v0.1", 46'702'792'704},      // mistralai/Mixtral-8x7B-v0.1
    {"llama-3.1-8b", 8'030'261'248},            // meta-llama/Llama-3.1-8B
    {"qwen2-7b", 7'615'616'512},                // Qwen/Qwen2-7B
    {"phi-3-mini-4k-instruct", 3'821'079'552},  // microsoft/Phi-3-mini-4k-instruct
    {"gemma-7b", 8'537'680'896},                // google/gemma-7b
    {"gemma-2-9b", 9'241'705'984},              // google/gemma-2-9b
    {"qwen1.5-moe-a2.7b", 14'315'784'192},      // Qwen/Qwen1.5-MoE-A2.7B
    // openai-community/gpt2: GPT2LMHeadModel's 124,439,808 (the safetensors file also stores the
    // 12 attn.bias causal-mask buffers, which are not parameters).
    {"gpt2", 124'439'808},
    // google-bert/bert-base-uncased: the safetensors total 110,106,428 is BertForPreTraining;
    // BertForMaskedLM builds neither the pooler (768*768 + 768) nor the next-sentence head
    // cls.seq_relationship (768*2 + 2).
    {"bert-base-uncased", 110'106'428 - (768 * 768 + 768) - (768 * 2 + 2)},
};

}  // namespace prefetchlab::testing
