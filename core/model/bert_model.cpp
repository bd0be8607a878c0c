// BertModel / BertForQuestionAnswering / BertForMaskedLM as in Hugging Face transformers
// v4.46.3 (models/bert/modeling_bert.py, attn_implementation eager or sdpa (BERT has no
// flash_attention_2 there: the scenario rejects it), absolute position embeddings). The task-head classes build BertModel(add_pooling_layer=False).
#include <string>

#include "core/model/model_builders.hpp"
#include "core/model/module_tree_builder.hpp"

namespace prefetchlab::core {

ModelSpec build_bert_model(const ModelConfig& config, const std::string& name, DType dtype,
                           AttentionImpl attention) {
  ModelSpec spec = model_spec_header(config, name, false);

  ModuleTreeBuilder b(spec, dtype);
  const std::int64_t e = b.element_bytes();
  const std::int64_t h = config.hidden_size;
  const std::int64_t f = config.intermediate_size;
  const std::int64_t v = config.vocab_size;
  const std::int64_t a = config.num_heads;
  const bool pooler = config.head == ModelHead::kNone;
  const bool mlm = config.head == ModelHead::kMlm;
  const bool tied = mlm && config.tie_embeddings;
  // The bare BertModel is the root; task heads hold it as "bert".
  const std::string base = config.head == ModelHead::kNone ? "" : "bert";
  auto n = [&](const std::string& suffix) { return join_name(base, suffix); };
  auto layer_prefix = [&](std::int64_t i) { return n("encoder.layer." + std::to_string(i)); };

  // --- Parameters in __init__ creation order (= ds_id under zero.Init) ---
  auto add_linear = [&](const std::string& module, std::int64_t in, std::int64_t out) {
    b.add_param(module + ".weight", in * out, in, out);
    b.add_param(module + ".bias", out);
  };
  auto add_norm = [&](const std::string& module) {
    b.add_param(module + ".weight", h);
    b.add_param(module + ".bias", h);
  };
  // BertEmbeddings.__init__: word, position, token_type, LayerNorm, dropout.
  b.add_param(n("embeddings.word_embeddings.weight"), v * h, tied ? h : 0, tied ? v : 0);
  b.add_param(n("embeddings.position_embeddings.weight"), config.max_positions * h);
  b.add_param(n("embeddings.token_type_embeddings.weight"), config.type_vocab_size * h);
  add_norm(n("embeddings.LayerNorm"));
  for (std::int64_t i = 0; i < config.num_layers; ++i) {
    // BertLayer.__init__: attention (self: query, key, value; output: dense, LayerNorm),
    // intermediate (dense), output (dense, LayerNorm).
    const std::string p = layer_prefix(i);
    add_linear(p + ".attention.self.query", h, h);
    add_linear(p + ".attention.self.key", h, h);
    add_linear(p + ".attention.self.value", h, h);
    add_linear(p + ".attention.output.dense", h, h);
    add_norm(p + ".attention.output.LayerNorm");
    add_linear(p + ".intermediate.dense", h, f);
    add_linear(p + ".output.dense", f, h);
    add_norm(p + ".output.LayerNorm");
  }
  if (pooler) add_linear("pooler.dense", h, h);
  if (config.head == ModelHead::kQa) add_linear("qa_outputs", h, 2);  // num_labels = 2
  if (mlm) {
    // BertLMPredictionHead.__init__: transform (dense, act, LayerNorm), decoder (Linear without
    // bias; its weight becomes word_embeddings.weight when tied), then `bias`, which is also
    // assigned as decoder.bias: one parameter registered in both modules.
    add_linear("cls.predictions.transform.dense", h, h);
    add_norm("cls.predictions.transform.LayerNorm");
    if (!tied) b.add_param("cls.predictions.decoder.weight", h * v, h, v);
    b.add_param("cls.predictions.bias", v);
  }

  // --- Modules in forward execution order ---
  // Activation bytes per layer: Korthikanti et al. 2022 (arXiv:2205.05198), each tensor charged to
  // the module that saves it; with f = 4h a layer totals sbh(34 + 5as/h).
  auto ids = [&](const std::string& module) {
    return std::vector<int>{b.param(module + ".weight"), b.param(module + ".bias")};
  };
  auto linear = [&](const std::string& module, std::int64_t in, std::int64_t out, std::int64_t saved) {
    b.leaf(module, "Linear", linear_costs(in, out, true, e).saving(saved), ids(module));
  };
  auto layer_norm = [&](const std::string& module) {
    b.leaf(module, "LayerNorm", layer_norm_costs(h, e).saving(2 * h), ids(module));  // input 2sbh
  };
  // nn.Dropout: a kernel that saves its mask (sbh) when p > 0; with p = 0 only the module's call
  // (hooks fire), no kernel.
  auto dropout = [&](const std::string& module, double p) {
    if (p > 0) {
      b.leaf(module, "Dropout", dropout_costs(h, e).saving(h));
    } else {
      b.leaf(module, "Dropout");
    }
  };
  const ModuleCosts residual_add = residual_add_costs(h, e);

  switch (config.head) {
    case ModelHead::kQa: b.begin("", "BertForQuestionAnswering"); break;
    // Root own work: the MLM loss (CrossEntropyLoss on the logits in their own dtype).
    case ModelHead::kMlm: b.begin("", "BertForMaskedLM", cross_entropy_costs(v, e, false)); break;
    default: break;
  }
  b.begin(base, "BertModel");
  // BertEmbeddings.forward: word, token_type, (add), position, (add), LayerNorm, dropout.
  b.begin(n("embeddings"), "BertEmbeddings", residual_add + residual_add);
  b.leaf(n("embeddings.word_embeddings"), "Embedding", embedding_costs(h, e),
         {b.param(n("embeddings.word_embeddings.weight"))});
  b.leaf(n("embeddings.token_type_embeddings"), "Embedding", embedding_costs(h, e),
         {b.param(n("embeddings.token_type_embeddings.weight"))});
  b.leaf(n("embeddings.position_embeddings"), "Embedding", embedding_costs(h, e),
         {b.param(n("embeddings.position_embeddings.weight"))});
  layer_norm(n("embeddings.LayerNorm"));
  dropout(n("embeddings.dropout"), config.embedding_dropout);
  b.end();
  b.begin(n("encoder"), "BertEncoder");
  // encoder.layer (ModuleList) is only iterated, never called: its hooks never fire.
  for (std::int64_t i = 0; i < config.num_layers; ++i) {
    const std::string p = layer_prefix(i);
    b.begin(p, "BertLayer");
    b.begin(p + ".attention", "BertAttention");
    AttentionShape shape;
    shape.hidden = h;
    shape.kv_dim = h;
    shape.heads = a;
    shape.causal = false;
    if (attention == AttentionImpl::kEager) {
      // BertSelfAttention: QK^T, / sqrt(d), + the extended attention mask, softmax, its
      // `dropout` module (hooks fire), PV. Saved (Korthikanti's accounting): Q and K 4sbh, V
      // 2sbh, softmax output 2as^2b; the dropout module its mask as^2b and output 2as^2b.
      b.begin(p + ".attention.self", "BertSelfAttention",
              attention_core_costs(attention, shape, e).saving(6 * h, 2 * a));
      linear(p + ".attention.self.query", h, h, 2 * h);  // saves the shared q/k/v input (2sbh)
      linear(p + ".attention.self.key", h, h, 0);
      linear(p + ".attention.self.value", h, h, 0);
      if (config.attention_dropout > 0) {
        b.leaf(p + ".attention.self.dropout", "Dropout", attention_dropout_costs(a, e).saving(0, 3 * a));
      } else {
        b.leaf(p + ".attention.self.dropout", "Dropout");
      }
    } else {
      // BertSdpaSelfAttention passes the dropout probability to sdpa and never calls its
      // registered `dropout` module. Saved: Q, K, V 6sbh, the output 2sbh, the log-sum-exp.
      shape.dropout = config.attention_dropout > 0;
      b.begin(p + ".attention.self", "BertSdpaSelfAttention",
              attention_core_costs(AttentionImpl::kSdpa, shape, e).saving(8 * h + 4 * a));
      linear(p + ".attention.self.query", h, h, 2 * h);  // saves the shared q/k/v input (2sbh)
      linear(p + ".attention.self.key", h, h, 0);
      linear(p + ".attention.self.value", h, h, 0);
    }
    b.end();
    // BertSelfOutput.forward: dense, dropout, LayerNorm(x + residual).
    b.begin(p + ".attention.output", "BertSelfOutput", residual_add);
    linear(p + ".attention.output.dense", h, h, 2 * h);  // output-projection input 2sbh
    dropout(p + ".attention.output.dropout", config.hidden_dropout);
    layer_norm(p + ".attention.output.LayerNorm");
    b.end();
    b.end();
    // BertLayer.feed_forward_chunk: intermediate (dense, act), output (dense, dropout, LayerNorm).
    b.begin(p + ".intermediate", "BertIntermediate");
    linear(p + ".intermediate.dense", h, f, 2 * h);  // first-linear input 2sbh
    // ACT2FN[hidden_act]: erf GeLU by default (~8 FLOPs/element), saving its input 2sbf (8sbh
    // at f = 4h).
    b.leaf(p + ".intermediate.intermediate_act_fn", activation_function_class(config.activation),
           activation_function_costs(config.activation, f, e));
    b.end();
    b.begin(p + ".output", "BertOutput", residual_add);
    linear(p + ".output.dense", f, h, 2 * f);  // GeLU output 2sbf
    dropout(p + ".output.dropout", config.hidden_dropout);
    layer_norm(p + ".output.LayerNorm");
    b.end();
    b.end();
  }
  b.end();
  if (pooler) {
    // BertPooler works on the first token of each sequence only: b rows, a per-sequence cost
    // TokenScaled cannot express, so it is charged once (as for b = 1); it is tiny.
    const ModuleCosts dense = linear_per_sequence_costs(h, h, e);
    KernelSpec tanh_kernel;
    tanh_kernel.op = "tanh";
    tanh_kernel.flops.fixed = 4 * h;
    tanh_kernel.bytes.fixed = 2 * h * e;
    ModuleCosts tanh;
    tanh.kernels = {tanh_kernel};
    b.begin("pooler", "BertPooler");
    b.leaf("pooler.dense", "Linear", dense, ids("pooler.dense"));
    b.leaf("pooler.activation", "Tanh", tanh);
    b.end();
  }
  b.end();  // BertModel
  if (config.head == ModelHead::kQa) {
    linear("qa_outputs", h, 2, 2 * h);
    b.end();
  }
  if (mlm) {
    // BertOnlyMLMHead -> BertLMPredictionHead: transform (dense, act, LayerNorm), decoder.
    const int bias_id = b.param("cls.predictions.bias");
    b.begin("cls", "BertOnlyMLMHead");
    b.begin("cls.predictions", "BertLMPredictionHead", {}, {bias_id});
    b.begin("cls.predictions.transform", "BertPredictionHeadTransform");
    linear("cls.predictions.transform.dense", h, h, 2 * h);
    b.leaf("cls.predictions.transform.transform_act_fn", activation_function_class(config.activation),
           activation_function_costs(config.activation, h, e));
    layer_norm("cls.predictions.transform.LayerNorm");
    b.end();
    const int weight_id = b.param(tied ? n("embeddings.word_embeddings.weight")
                                       : "cls.predictions.decoder.weight");
    b.leaf("cls.predictions.decoder", "Linear", linear_costs(h, v, true, e).saving(2 * h),
           {weight_id, bias_id});
    b.end();
    b.end();
    b.end();
  }
  return spec;
}

}  // namespace prefetchlab::core
