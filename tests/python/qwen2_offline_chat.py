# The second seed's offline run, as issue 16 describes it: LLM(model=...,
# quantization=..., tensor_parallel_size=..., gpu_memory_utilization=...)
# with Qwen2's recommended sampling settings, a chat through llm.chat and a
# batch through llm.generate. The seed's own file is not in the repository;
# this is its shape with vLLM's API, unchanged but for the import line, the
# model (the bundled stories260K in place of Qwen2-7B-Instruct: no
# quantization, one GPU at most) and the chat template (stories260K has
# none; Llama 2's from configs/). Run from the repository root.
from pagoda import LLM, SamplingParams

llm = LLM(model="models/stories260K", quantization=None, tensor_parallel_size=1,
          gpu_memory_utilization=0.9)
sampling_params = SamplingParams(temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.05,
                                 max_tokens=64)

with open("configs/chat_templates/llama-2-chat.jinja") as f:
    chat_template = f.read()
messages = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Tell me a story about a little dog."},
]
outputs = llm.chat(messages, sampling_params, chat_template=chat_template)
for output in outputs:
    prompt = output.prompt
    generated_text = output.outputs[0].text
    print(f"Prompt: {prompt!r}, Generated text: {generated_text!r}")

prompts = ["Once upon a time", "The little dog", "Lily and Ben"]
outputs = llm.generate(prompts, sampling_params)
for output in outputs:
    prompt = output.prompt
    generated_text = output.outputs[0].text
    print(f"Prompt: {prompt!r}, Generated text: {generated_text!r}")
